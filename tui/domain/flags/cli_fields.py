"""Any flag of the installed vLLM as a form field of its own, beside the declared ones.

``ServeFlags`` declares the common flags; every other option of the installed ``vllm
serve`` (its ``VllmCli``: introspected, or the shipped table of its version) can still be
edited in a field: a switch or a choice picks from a list, a number or a JSON config
(``--speculative-config``, ``--compilation-config``) is typed and checked as vLLM's parser
checks it (its type, its config class's range, the ``Literal`` values of the JSON's fields).
Such a field's value travels as extra arguments (:func:`tokens_of`); a run's extra
arguments that name such flags are shown back in their fields (:func:`lift`).

Pure: the form (``tui.ui.widgets.cli_field_rows``) reads it.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from tui.domain.flags.argv import is_dotted, lex, take_values
from tui.domain.flags.extra_args import extra_args_problems
from tui.domain.flags.secrets import SECRET_FLAGS
from tui.domain.flags.vllm_cli import CliFlag, VllmCli

ON, OFF = "on", "off"
_NOT_FIELDS = frozenset({"help", "model", "config"})  # refused in extra args (serve_rules)

Bounds = Mapping[str, tuple[str, Mapping[str, float]]]
Literals = Mapping[str, tuple[str, Mapping[str, tuple[str, ...]]]]


class EditorKind(StrEnum):
    """How a field edits its flag."""

    SWITCH = "switch"  # on / off (off only when vLLM has a negative spelling)
    CHOICE = "choice"  # one of the parser's choices
    JSON = "json"  # a JSON object (a vLLM config class)
    LIST = "list"  # several values (nargs + or *), shell quoting
    VALUE = "value"  # one typed value (int, float, human-readable int, text)


def editor_kind(flag: CliFlag) -> EditorKind:
    """The editor ``flag`` gets."""
    if flag.is_boolean:
        return EditorKind.SWITCH
    if flag.choices:
        return EditorKind.CHOICE
    if flag.nargs in ("+", "*"):
        return EditorKind.LIST
    if (flag.type_name or "").startswith("json"):
        return EditorKind.JSON
    return EditorKind.VALUE


def fieldable(flag: CliFlag) -> bool:
    """Whether ``flag`` may be a field: not ``--help``/``--config``/the model, no secret
    (those live in vtc's environment, never in the form), a ``--`` spelling, not
    deprecated only (vLLM still takes those: they stay fields, marked)."""
    if flag.action == "help" or flag.dest in _NOT_FIELDS or not flag.name.startswith("--"):
        return False
    return not any(o in SECRET_FLAGS for o in flag.option_strings)


def switch_values(flag: CliFlag) -> tuple[str, ...]:
    """What a switch's list offers: ``on``, and ``off`` when vLLM can be told so."""
    return (ON, OFF) if flag.negation is not None or flag.action == "store_false" else (ON,)


def tokens_of(flag: CliFlag, text: str) -> tuple[str, ...]:
    """The field's text as argv tokens (``()``: not set). ``ValueError`` for unclosed quotes."""
    raw = text.strip()
    if not raw:
        return ()
    kind = editor_kind(flag)
    if kind is EditorKind.SWITCH:
        if raw == ON:
            return (flag.name,)
        negation = flag.negation
        return (negation,) if negation is not None else ()
    if kind is EditorKind.LIST:
        return (flag.name, *shlex.split(raw))
    return (flag.name, raw)


def text_of(flag: CliFlag, values: Sequence[str], *, negative: bool = False) -> str:
    """The field's text for values read from an argv (a switch: ``on``/``off``)."""
    if editor_kind(flag) is EditorKind.SWITCH:
        return OFF if negative else ON
    if editor_kind(flag) is EditorKind.LIST:
        return shlex.join(values)
    return values[0] if values else ""


def field_problems(
    flag: CliFlag,
    text: str,
    cli: VllmCli,
    *,
    bounds: Bounds | None = None,
    literals: Literals | None = None,
) -> list[str]:
    """Why vLLM would refuse the field's text (its parser's and config class's words)."""
    try:
        tokens = tokens_of(flag, text)
    except ValueError as exc:  # an unclosed quote
        return [f"{flag.name}: {exc}"]
    if not tokens:
        return []
    if editor_kind(flag) is EditorKind.JSON and not _is_object(tokens[1]):
        return [
            f"argument {flag.name}: expected a JSON object such as "
            f"{_example(flag)} (vLLM builds its config from one)"
        ]
    check = extra_args_problems(tokens, cli, bounds=bounds, literals=literals)
    return [p.message for p in check.problems]


def _is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


_EXAMPLES: Mapping[str, str] = {
    "speculative_config": '{"method": "ngram", "num_speculative_tokens": 4}',
    "compilation_config": '{"cudagraph_mode": "NONE"}',
    "kv_transfer_config": '{"kv_connector": "...", "kv_role": "kv_both"}',
}


def _example(flag: CliFlag) -> str:
    return _EXAMPLES.get(flag.dest, '{"key": value}')


def placeholder(flag: CliFlag) -> str:
    """What an empty field shows: vLLM's default, or an example of the JSON it takes."""
    kind = editor_kind(flag)
    if kind is EditorKind.JSON:
        return _example(flag) if flag.dest in _EXAMPLES else "JSON object"
    if flag.default is None or flag.default == "" or flag.default == []:
        return "default"
    return f"default {flag.default}"


@dataclass
class Lifted:
    """An argv's flags that have fields: their text by dest, in order, and what is left."""

    values: dict[str, str] = field(default_factory=dict)
    rest: list[str] = field(default_factory=list)


def lift(extra: Sequence[str], cli: VllmCli, keep: frozenset[str] = frozenset()) -> Lifted:
    """Take the field-able flags out of ``extra`` (extra arguments): an option spelled in
    full or by an alias, with exactly the values its ``nargs`` asks, given once. Dotted JSON
    keys (``-cc.mode 3``), abbreviations, repeats and anything unknown stay in ``rest``;
    ``keep``: dests that stay there too (the form's declared flags)."""
    out = Lifted()
    tokens = lex(extra)
    seen: set[str] = set()
    i = 0
    while i < len(tokens):
        token = tokens[i]
        flag = cli.flag(token.option) if token.option is not None else None
        if flag is None or token.option not in flag.option_strings or is_dotted(token.text):
            out.rest.append(token.text)
            i += 1
            continue
        values = [] if flag.is_boolean else take_values(tokens, i, flag.nargs)
        consumed = 0 if token.inline is not None else len(values)
        chunk = [t.text for t in tokens[i : i + 1 + consumed]]
        movable = fieldable(flag) and flag.dest not in keep and flag.dest not in seen
        if movable and (token.inline is None or not flag.is_boolean) and _count_ok(flag, values):
            out.values[flag.dest] = text_of(flag, values, negative=flag.is_negative(token.option))
            seen.add(flag.dest)
        else:
            out.rest.extend(chunk)
        i += 1 + consumed
    return out


def _count_ok(flag: CliFlag, values: Sequence[str]) -> bool:
    if flag.is_boolean:
        return not values
    if flag.nargs is None:
        return len(values) == 1
    if flag.nargs == "+":
        return len(values) >= 1
    return flag.nargs == "*"
