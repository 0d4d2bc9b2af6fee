"""The one tokenizer of ``vllm serve`` command lines, with vLLM's and argparse's rules.

Every part of vtc that reads a serve argv (the ``vtc -- serve`` parser, the form's extra
arguments, the check against the installed vLLM's flags, the secrets split, the ``--config``
export, the simulator's command line) lexes it here, so they agree on which token is an
option, which is a value, and what an option is called:

- vLLM's ``FlexibleArgumentParser.parse_args`` rewrites (``utils/argparse_utils.py:337-369``):
  ``_`` becomes ``-`` in a ``--`` name up to its first ``.``; ``--help=X`` is ``--help``;
  ``-O3``/``-O=3`` is ``--optimization-level 3`` and ``-O 3`` likewise; a dotted
  ``--json-arg.key value`` addresses the JSON option before the dot.
- Python 3.11 argparse's ``_parse_optional``: a token is a value unless it starts with ``-``
  and is longer than one character; negative numbers (``-1``, ``-.5``) and tokens with a
  space in their name are values; after ``--`` everything is a value.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# argparse's _negative_number_matcher (Python 3.11, the interpreter vLLM 0.32's CPU venv runs)
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
OPTIMIZATION_LEVEL = "--optimization-level"
_O_LEVELS = frozenset({"0", "1", "2", "3"})


def looks_like_option(token: str) -> bool:
    """Whether argparse reads ``token`` as an option rather than a value.

    Values: anything not starting with ``-``, ``-`` itself, negative numbers (vLLM's parser
    has no option that looks like one) and tokens whose name part holds a space.
    """
    if len(token) < 2 or not token.startswith("-"):
        return False
    if NEGATIVE_NUMBER.match(token):
        return False
    return " " not in token.split("=", 1)[0]


def canonical_option(token: str) -> str:
    """The option name vLLM's parser looks up for an option token (no ``=value``).

    ``--max_model_len=5`` -> ``--max-model-len``; ``-O3`` -> ``--optimization-level``;
    ``-cc.mode`` -> ``-cc``; ``--compilation_config.mode`` -> ``--compilation-config``;
    ``--help=all`` -> ``--help``; short options are kept (``-tp``).
    """
    name = token.split("=", 1)[0]
    if name.startswith("--"):
        head = name[2:].split(".", 1)[0]
        return "--" + head.replace("_", "-")
    if token.startswith("-O") and token != "-O":
        return OPTIMIZATION_LEVEL
    return name.split(".", 1)[0]


def is_dotted(token: str) -> bool:
    """A dotted JSON option (``-cc.mode``, ``--kv-transfer-config.kv_role``)."""
    return "." in token.split("=", 1)[0]


@dataclass(frozen=True)
class ArgToken:
    """One token of a serve argv as vLLM's parser sees it.

    ``option`` is the canonical option name (:func:`canonical_option`), ``None`` for a value.
    ``inline`` is the text after ``=`` in ``--opt=value`` (and the level of ``-O3``), else
    ``None``. ``index`` is the token's position in the argv.
    """

    text: str
    option: str | None
    inline: str | None
    index: int

    @property
    def spelled(self) -> str:
        """The option as the operator wrote it, without ``=value`` (the value for values)."""
        return self.text.split("=", 1)[0] if self.option is not None else self.text


def lex(argv: Sequence[str]) -> list[ArgToken]:
    """Classify every token of ``argv`` (what follows ``vllm serve``)."""
    out: list[ArgToken] = []
    tokens = list(argv)
    rest_are_values = False
    for i, text in enumerate(tokens):
        if rest_are_values or not looks_like_option(text):
            out.append(ArgToken(text, None, None, i))
            continue
        if text == "--":
            rest_are_values = True  # argparse: everything after "--" is positional
            out.append(ArgToken(text, None, None, i))
            continue
        option = canonical_option(text)
        if text == "-O" and i + 1 < len(tokens) and tokens[i + 1] in _O_LEVELS:
            option = OPTIMIZATION_LEVEL  # vLLM: "-O 3" is --optimization-level 3
        out.append(ArgToken(text, option, _inline(text), i))
    return out


def _inline(text: str) -> str | None:
    if text.startswith("-O") and text != "-O" and not text.startswith("--"):
        return text[3:] if text[2:3] == "=" else text[2:]
    if "=" in text:
        return text.split("=", 1)[1]
    return None


def take_values(tokens: Sequence[ArgToken], i: int, nargs: str | int | None) -> list[str]:
    """The values argparse gives the option at ``tokens[i]`` (its inline value included).

    ``nargs`` as argparse declares it: ``None`` one value, ``"?"`` zero or one, ``"+"`` one or
    more, ``"*"`` any, an int exactly that many, ``0`` none. Values are the following
    non-option tokens, taken greedily up to what ``nargs`` allows. The caller checks the count.
    """
    token = tokens[i]
    if token.inline is not None:
        return [token.inline]
    if is_dotted(token.text):
        # vLLM's dotted JSON args take the next token as their value, whatever it looks like
        return [tokens[i + 1].text] if i + 1 < len(tokens) else []
    if nargs == 0:
        return []
    limit: int | None
    if nargs is None or nargs == "?":
        limit = 1
    elif isinstance(nargs, int):
        limit = nargs
    else:
        limit = None  # "+", "*" (and any other argparse pattern): greedy
    values: list[str] = []
    j = i + 1
    while j < len(tokens) and tokens[j].option is None and tokens[j].text != "--":
        if limit is not None and len(values) >= limit:
            break
        values.append(tokens[j].text)
        j += 1
    return values


def strip_program(argv: Sequence[str]) -> list[str]:
    """``[vllm|vtc-sim] [serve] rest`` -> ``rest`` (a pasted command line works as well)."""
    tokens = list(argv)
    if tokens and tokens[0].rsplit("/", 1)[-1] in ("vllm", "vtc-sim"):
        tokens = tokens[1:]
    if tokens and tokens[0] == "serve":
        tokens = tokens[1:]
    return tokens
