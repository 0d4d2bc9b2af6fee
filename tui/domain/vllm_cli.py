"""The flags of an installed vLLM's ``vllm serve``, as its own argparse parser declares them.

``VllmCli`` is built from the JSON that ``tui/server/introspect_script.py`` dumps from the
target vLLM (reference 1.1: ``make_arg_parser(FlexibleArgumentParser())``), or, as a
fallback, from the text of ``vllm serve --help=all`` (:func:`parse_serve_help`). It answers
the questions the console asks before a launch: is this option known to the installed
version (:meth:`VllmCli.known`, :meth:`VllmCli.unknown_options`), and which flags match what
the operator typed in the form (:meth:`VllmCli.search`).

Option lookup mirrors what the server does to its argv, in order:

1. vLLM's ``FlexibleArgumentParser.parse_args`` rewrites (``utils/argparse_utils.py:337-463``):
   ``--help=X`` -> ``--help``; ``_`` -> ``-`` in a ``--`` name up to its first ``.``;
   ``-O3``/``-O=3``/``-O 3`` -> ``--optimization-level``; a dotted ``--json-arg.key value``
   (or ``-cc.key=value``) becomes ``--json-arg '<json>'``, so only the part before the ``.``
   must be an option.
2. Python 3.11 argparse's ``_parse_optional``/``_get_option_tuples``: exact match, then
   ``--opt=value``, then unambiguous prefixes of ``--`` options (``allow_abbrev``), then
   single-dash options glued to their value (``-qawq``); negative numbers and strings with
   spaces are values, not options.

Pure: no I/O.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

# argparse's _negative_number_matcher
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_BOOL_ACTIONS = frozenset({"boolean_optional", "store_true", "store_false"})
_OPTIMIZATION_LEVEL = "--optimization-level"

# Flags that older tuning scripts still pass and vLLM 0.32.0 no longer knows, with what to
# do instead (reference, header of vllm-0.32-reference.md).
REMOVED_FLAG_HINTS: Mapping[str, str] = {
    "--swap-space": "removed by vLLM 0.32; drop it",
    "--disable-log-requests": "removed by vLLM 0.32, request logging is now opt-in "
    "(--enable-log-requests); drop it",
    "--num-scheduler-steps": "multi-step scheduling was removed; drop it",
    "--multi-step-stream-outputs": "multi-step scheduling was removed; drop it",
}


class CliDumpError(ValueError):
    """The introspection JSON (or help text) does not describe a ``vllm serve`` parser."""


@dataclass(frozen=True)
class CliFlag:
    """One argparse action of ``vllm serve``.

    ``type_name`` is the name of vLLM's ``type=`` callable (``int``, ``float``, ``str``,
    ``bool``, ``human_readable_int``, ``human_readable_int_or_auto``, ``json``,
    ``json:CompilationConfig``, ``json_or_str``; ``None`` for ``--help``). ``optional`` means
    ``""``/``"None"`` parse to None. ``action`` is ``store``, ``store_true``,
    ``boolean_optional`` (``--x``/``--no-x``), ``append``, ``help`` or ``custom``.
    """

    dest: str
    option_strings: tuple[str, ...]
    type_name: str | None
    default: Any
    choices: tuple[Any, ...] | None
    nargs: str | int | None
    help: str
    group: str
    action: str = "store"
    optional: bool = False
    metavar: str | None = None
    deprecated: bool = False

    @property
    def name(self) -> str:
        """The primary spelling: the first ``--`` option string."""
        for option in self.option_strings:
            if option.startswith("--"):
                return option
        return self.option_strings[0] if self.option_strings else self.dest

    @property
    def aliases(self) -> tuple[str, ...]:
        """Every other spelling (short forms, ``--no-x``, alternative long names)."""
        return tuple(o for o in self.option_strings if o != self.name)

    @property
    def is_boolean(self) -> bool:
        """A switch that takes no value (``--x``, and ``--no-x`` for ``boolean_optional``)."""
        return self.action in _BOOL_ACTIONS

    @property
    def takes_value(self) -> bool:
        """Whether the option consumes argument(s) after it."""
        return self.nargs != 0 and not self.is_boolean and self.action != "help"

    @property
    def is_deprecated(self) -> bool:
        """Marked ``deprecated=True``, or its help says "--x is deprecated" (vLLM's habit)."""
        return self.deprecated or any(
            self.help.startswith(f"{o} is deprecated") for o in self.option_strings
        )

    @property
    def negation(self) -> str | None:
        """The ``--no-x`` spelling, when the flag has one."""
        for option in self.option_strings:
            if option.startswith("--no-"):
                return option
        return None

    def to_json(self) -> dict[str, Any]:
        """The same shape the introspection script writes."""
        return {
            "dest": self.dest,
            "option_strings": list(self.option_strings),
            "type_name": self.type_name,
            "default": self.default,
            "choices": None if self.choices is None else list(self.choices),
            "nargs": self.nargs,
            "help": self.help,
            "group": self.group,
            "action": self.action,
            "optional": self.optional,
            "metavar": self.metavar,
            "deprecated": self.deprecated,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CliFlag:
        """One action of the introspection JSON; :class:`CliDumpError` if malformed."""
        if not isinstance(data, Mapping):
            raise CliDumpError(f"an action must be an object, got {type(data).__name__}")
        try:
            dest = data["dest"]
            options = data["option_strings"]
        except KeyError as exc:
            raise CliDumpError(f"action without {exc.args[0]!r}: {dict(data)!r:.200}") from exc
        if not isinstance(dest, str) or not isinstance(options, list):
            raise CliDumpError(f"action {dest!r}: dest must be text, option_strings a list")
        if not all(isinstance(o, str) and o.startswith("-") for o in options):
            raise CliDumpError(f"action {dest!r}: option strings must start with '-'")
        choices = data.get("choices")
        nargs = data.get("nargs")
        if nargs is not None and not isinstance(nargs, (str, int)):
            raise CliDumpError(f"action {dest!r}: nargs must be text or a number")
        return cls(
            dest=dest,
            option_strings=tuple(options),
            type_name=_opt_str(data.get("type_name")),
            default=data.get("default"),
            choices=None if choices is None else tuple(choices),
            nargs=nargs,
            help=str(data.get("help") or ""),
            group=str(data.get("group") or ""),
            action=str(data.get("action") or "store"),
            optional=bool(data.get("optional", False)),
            metavar=_opt_str(data.get("metavar")),
            deprecated=bool(data.get("deprecated", False)),
        )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


ResolutionStatus = Literal["known", "ambiguous", "unknown", "positional"]


@dataclass(frozen=True)
class Resolution:
    """What vLLM's parser makes of one argv token.

    ``option`` is the token after vLLM's rewrites; ``flag`` the action it selects;
    ``candidates`` the option strings an ambiguous prefix could mean.
    """

    token: str
    option: str
    status: ResolutionStatus
    flag: CliFlag | None = None
    candidates: tuple[str, ...] = ()


@dataclass(frozen=True)
class OptionProblem:
    """An option of a command line that the installed vLLM rejects or discourages.

    ``kind``: ``unknown`` and ``ambiguous`` make vLLM exit with status 2 before it starts;
    ``deprecated`` only warns.
    """

    option: str
    kind: Literal["unknown", "ambiguous", "deprecated"]
    message: str
    suggestions: tuple[str, ...] = ()


@dataclass(frozen=True)
class VllmCli:
    """Every ``vllm serve`` flag of one installed vLLM version.

    ``flags`` holds the optional actions in the parser's order (``-h/--help`` included,
    since it takes part in prefix matching; the positional ``model_tag`` excluded).
    """

    version: str
    flags: Sequence[CliFlag]  # stored as a tuple
    group_descriptions: Mapping[str, str] = field(default_factory=dict)
    _index: dict[str, CliFlag] = field(init=False, repr=False, compare=False)
    _by_dest: dict[str, CliFlag] = field(init=False, repr=False, compare=False)
    _negative_like: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        flags = tuple(self.flags)  # accept any sequence
        object.__setattr__(self, "flags", flags)
        index: dict[str, CliFlag] = {}
        by_dest: dict[str, CliFlag] = {}
        for flag in flags:
            for option in flag.option_strings:
                index[option] = flag
            by_dest.setdefault(flag.dest, flag)
        object.__setattr__(self, "_index", index)
        object.__setattr__(self, "_by_dest", by_dest)
        object.__setattr__(self, "_negative_like", any(_NEGATIVE_NUMBER.match(o) for o in index))

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VllmCli:
        """Build from the introspection script's JSON (``dump`` mode)."""
        if not isinstance(data, Mapping):
            raise CliDumpError(f"expected a JSON object, got {type(data).__name__}")
        actions = data.get("actions")
        if not isinstance(actions, list):
            raise CliDumpError("the dump has no 'actions' list")
        version = data.get("vllm_version") or data.get("dist_version") or ""
        flags = [CliFlag.from_json(a) for a in actions]
        groups = {
            str(g.get("title") or ""): str(g.get("description") or "")
            for g in data.get("groups") or []
            if isinstance(g, Mapping)
        }
        return cls(
            version=str(version),
            flags=tuple(f for f in flags if f.option_strings),
            group_descriptions=groups,
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON object :meth:`from_json` reads back."""
        return {
            "vllm_version": self.version,
            "groups": [{"title": t, "description": d} for t, d in self.group_descriptions.items()],
            "actions": [f.to_json() for f in self.flags],
        }

    # -- lookup ------------------------------------------------------------------------------
    @property
    def option_strings(self) -> tuple[str, ...]:
        """Every option string the parser registers."""
        return tuple(self._index)

    def flag(self, name: str) -> CliFlag | None:
        """The flag with this dest (``max_model_len``) or exact option (``--max-model-len``)."""
        if name in self._by_dest:
            return self._by_dest[name]
        return self._index.get(_rewrite_option(name))

    def resolve(self, token: str) -> Resolution:
        """What the installed ``vllm serve`` makes of ``token`` (see the module docstring)."""
        option = _rewrite_option(token)
        return self._argparse_lookup(token, option)

    def known(self, option: str) -> bool:
        """Whether the installed vLLM accepts ``option`` as a flag.

        ``_`` or ``-``, ``--x=value``, ``--no-x`` of booleans, dotted JSON keys
        (``-cc.mode``) and unambiguous prefixes count, as they do for vLLM's parser.
        """
        return self.resolve(option).status == "known"

    def unknown_options(self, argv_tokens: Sequence[str]) -> list[str]:
        """Options of ``argv_tokens`` (what follows ``vllm serve``) that vLLM would reject.

        Unrecognized and ambiguous options, spelled as given (without ``=value``). Values
        are skipped the way argparse skips them: a token that does not look like an option
        is never one, whatever precedes it.
        """
        return [p.option for p in self.problems(argv_tokens) if p.kind != "deprecated"]

    def problems(self, argv_tokens: Sequence[str]) -> list[OptionProblem]:
        """Each option of ``argv_tokens`` that vLLM rejects (or deprecates), with a message."""
        out: list[OptionProblem] = []
        tokens = list(argv_tokens)
        i = 0
        while i < len(tokens):
            token = tokens[i]
            i += 1
            if token == "--":
                break  # argparse: everything after "--" is positional
            if not token.startswith("-"):
                continue
            if token == "-O":
                if i < len(tokens) and tokens[i] in ("0", "1", "2", "3"):
                    i += 1  # vLLM: "-O 3" -> --optimization-level 3
                    continue
                res = self._argparse_lookup(token, token)  # vLLM leaves a bare -O alone
            else:
                res = self.resolve(token)
            if res.status == "positional":
                continue  # a negative number or text with spaces: a value
            name = token.split("=", 1)[0]
            if "." in name and "=" not in token:
                i += 1  # a dotted JSON arg takes the next token as its value, always
            if res.status == "unknown":
                out.append(self._unknown_problem(name))
            elif res.status == "ambiguous":
                out.append(
                    OptionProblem(
                        option=name,
                        kind="ambiguous",
                        message=f"{name}: ambiguous option: could match "
                        + ", ".join(res.candidates),
                        suggestions=res.candidates,
                    )
                )
            elif res.flag is not None and res.flag.is_deprecated:
                first = res.flag.help.split("\n\n", 1)[0]
                detail = " ".join(first.split())[:200] or f"deprecated in vLLM {self.version}"
                out.append(
                    OptionProblem(option=name, kind="deprecated", message=f"{name}: {detail}")
                )
        return out

    def suggest(self, option: str, n: int = 3) -> list[str]:
        """Long options spelled like ``option`` (for "did you mean")."""
        wanted = _rewrite_option(option).split("=", 1)[0]
        longs = [o for o in self._index if o.startswith("--")]
        return difflib.get_close_matches(wanted, longs, n=n, cutoff=0.6)

    # -- form support ------------------------------------------------------------------------
    def search(self, text: str) -> list[CliFlag]:
        """Flags matching every word of ``text``, best first (``--help`` never listed).

        Words match option strings and dests (``_``/``-`` alike, leading dashes ignored),
        the group title, choices and help text. Order: exact name, name prefix, name
        substring, then matches in group/help/choices only; ties keep the parser's order.
        """
        words = [_norm_word(w) for w in text.split()]
        words = [w for w in words if w]
        flags = [f for f in self.flags if f.action != "help"]
        if not words:
            return flags
        ranked: list[tuple[int, int, CliFlag]] = []
        for position, flag in enumerate(flags):
            names = [_norm_word(o) for o in flag.option_strings] + [_norm_word(flag.dest)]
            haystack = " ".join(
                [
                    flag.group.lower(),
                    flag.help.lower(),
                    " ".join(str(c).lower() for c in flag.choices or ()),
                ]
            )
            best = 0
            for word in words:
                if word in names:
                    rank = 0
                elif any(n.startswith(word) for n in names):
                    rank = 1
                elif any(word in n for n in names):
                    rank = 2
                elif word in haystack or word.replace("-", "_") in haystack:
                    rank = 3
                else:
                    break
                best = max(best, rank)
            else:
                ranked.append((best, position, flag))
        ranked.sort(key=lambda t: (t[0], t[1]))
        return [flag for _, _, flag in ranked]

    def common_first(self, names: Iterable[str]) -> list[CliFlag]:
        """All flags (``--help`` excluded), those named in ``names`` first, in that order.

        ``names`` may be dests or option strings (e.g. ``[s.name for s in flag_specs()]``);
        names this vLLM does not know are skipped. The rest keep the parser's order.
        """
        first: list[CliFlag] = []
        for name in names:
            flag = self.flag(name)
            if flag is not None and flag.action != "help" and flag not in first:
                first.append(flag)
        rest = [f for f in self.flags if f.action != "help" and f not in first]
        return first + rest

    # -- internals ---------------------------------------------------------------------------
    def _unknown_problem(self, name: str) -> OptionProblem:
        hint = REMOVED_FLAG_HINTS.get(_rewrite_option(name))
        suggestions = tuple(self.suggest(name))
        message = f"{name}: not an option of vllm serve {self.version}".rstrip()
        if hint:
            message += f": {hint}"
        elif suggestions:
            message += f"; did you mean {' or '.join(suggestions)}?"
        return OptionProblem(option=name, kind="unknown", message=message, suggestions=suggestions)

    def _argparse_lookup(self, token: str, arg: str) -> Resolution:
        """Python 3.11 ``ArgumentParser._parse_optional`` over this parser's options."""
        index = self._index
        if not arg or arg[0] != "-":
            return Resolution(token, arg, "positional")
        if arg in index:
            return Resolution(token, arg, "known", index[arg])
        if len(arg) == 1:
            return Resolution(token, arg, "positional")
        if "=" in arg:
            head = arg.split("=", 1)[0]
            if head in index:
                return Resolution(token, head, "known", index[head])
        matches = self._option_tuples(arg)
        if len(matches) > 1:
            return Resolution(token, arg, "ambiguous", candidates=tuple(matches))
        if len(matches) == 1:
            return Resolution(token, matches[0], "known", index[matches[0]])
        if _NEGATIVE_NUMBER.match(arg) and not self._negative_like:
            return Resolution(token, arg, "positional")
        if " " in arg:
            return Resolution(token, arg, "positional")
        return Resolution(token, arg.split("=", 1)[0], "unknown")

    def _option_tuples(self, arg: str) -> list[str]:
        """Python 3.11 ``ArgumentParser._get_option_tuples`` (``allow_abbrev`` is on)."""
        if arg[1] == "-":
            prefix = arg.split("=", 1)[0]
            return [o for o in self._index if o.startswith(prefix)]
        short = arg[:2]
        return [o for o in self._index if o == short or o.startswith(arg)]


def _norm_word(text: str) -> str:
    return text.strip().lower().lstrip("-").replace("_", "-")


def _rewrite_option(token: str) -> str:
    """vLLM's ``FlexibleArgumentParser.parse_args`` rewrites of one option token.

    Returns the option argparse then looks up (``=value`` kept, dotted keys cut at the dot).
    """
    if token.startswith("--help="):
        return "--help"
    if token.startswith("--"):
        key, eq, value = token.partition("=")
        head, dot, tail = key[2:].partition(".")
        token = "--" + head.replace("_", "-") + dot + tail + eq + value
    elif token.startswith("-O") and token != "-O" and not _NEGATIVE_NUMBER.match(token):
        return _OPTIMIZATION_LEVEL
    elif token == "-O":
        return _OPTIMIZATION_LEVEL  # "-O 3"; a stray "-O" is judged by problems()
    if token.startswith("-") and not _NEGATIVE_NUMBER.match(token):
        key, eq, value = token.partition("=")
        if "." in key:
            # --json-arg.key[+] value: vLLM re-inserts it as --json-arg '<json>'
            return key.split(".", 1)[0]
    return token


# -- fallback: the text of `vllm serve --help=all` ------------------------------------------
_GROUP_TITLE = re.compile(r"^(\S.*):$")
_OPTION_LINE = re.compile(r"^  (-\S.*?)(?:\s{2,}(\S.*))?$")
_DEFAULT_TAIL = re.compile(r"\s*\(default: (.*)\)\s*$", re.S)
_CHOICES = re.compile(r"^\{([^{}]*)\}$")


def parse_serve_help(text: str, version: str = "") -> VllmCli:
    """Parse ``vllm serve --help=all`` output into a :class:`VllmCli` (fallback path).

    Option strings, choices (``{a,b}`` metavars), nargs ``+`` (``X [X ...]``), help and the
    printed default (as text) survive; types do not (``type_name`` is ``bool`` for options
    without a metavar, else ``None``). Raises :class:`CliDumpError` if no option is found.
    """
    flags: list[CliFlag] = []
    group = ""
    current: dict[str, Any] | None = None

    def finish() -> None:
        if current is not None:
            flags.append(_flag_from_help(current))

    for line in text.splitlines():
        if not line.strip():
            continue
        title = _GROUP_TITLE.match(line)
        if title and not line.startswith(" "):
            finish()
            current = None
            group = title.group(1)
            if group.lower() in ("options", "optional arguments"):
                group = "options"
            continue
        option = _OPTION_LINE.match(line)
        if option and not line.startswith("   "):
            finish()
            current = {"spec": option.group(1), "help": [option.group(2) or ""], "group": group}
            continue
        if current is not None and line.startswith("   "):
            current["help"].append(line.strip())
        elif not line.startswith(" "):
            # prose at column 0 (the JSON tip, the epilog): ends the current option
            finish()
            current = None
    finish()
    if not flags:
        raise CliDumpError("no options found in the help text")
    return VllmCli(version=version, flags=tuple(flags))


def _flag_from_help(entry: Mapping[str, Any]) -> CliFlag:
    options: list[str] = []
    metavar: str | None = None
    nargs: str | None = None
    for part in re.split(r", (?=-)", entry["spec"]):
        words = part.split(" ", 1)
        options.append(words[0])
        if len(words) > 1:
            metavar = words[1]
            if "..." in metavar:
                nargs = "+"
    help_text = " ".join(w for w in entry["help"] if w)
    default: Any = None
    tail = _DEFAULT_TAIL.search(help_text)
    if tail:
        default = tail.group(1)
        help_text = help_text[: tail.start()]
    choices: tuple[str, ...] | None = None
    if metavar is not None:
        first = metavar.split(" ", 1)[0]
        brace = _CHOICES.match(first)
        if brace:
            choices = tuple(brace.group(1).split(","))
    dest = options[0].lstrip("-").replace("-", "_")
    for option in options:
        if option.startswith("--") and not option.startswith("--no-"):
            dest = option[2:].replace("-", "_")
            break
    is_switch = metavar is None
    action = "store"
    if is_switch:
        action = (
            "boolean_optional"
            if any(o.startswith("--no-") for o in options)
            else ("help" if "--help" in options else "store_true")
        )
    return CliFlag(
        dest=dest,
        option_strings=tuple(options),
        type_name="bool" if is_switch and action != "help" else None,
        default=default,
        choices=choices,
        nargs=0 if is_switch else nargs,
        help=help_text.strip(),
        group=str(entry["group"]),
        action=action,
        metavar=metavar,
    )
