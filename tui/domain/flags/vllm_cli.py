"""The flags of an installed vLLM's ``vllm serve``, as its own argparse parser declares them.

``VllmCli`` is built from the JSON that ``tui/server/introspect_script.py`` dumps from the
target vLLM (reference 1.1: ``make_arg_parser(FlexibleArgumentParser())``); vLLM 0.32's own
table ships in :mod:`tui.domain.flags.vllm_serve_options` for when none was introspected. It answers
the questions the console asks before a launch: is this option known to the installed
version (:meth:`VllmCli.known`, :meth:`VllmCli.unknown_options`), and which flags match what
the operator typed in the form (:meth:`VllmCli.search`).

Option lookup mirrors what the server does to its argv: the tokens are lexed by
:mod:`tui.domain.flags.argv` (vLLM's rewrites: ``_`` -> ``-``, ``-O3``, dotted JSON keys,
``--help=X``), then looked up as Python 3.11 argparse's ``_parse_optional`` /
``_get_option_tuples`` do: exact match, then unambiguous prefixes of ``--`` options
(``allow_abbrev``), then single-dash options glued to their value (``-qawq``); negative
numbers and strings with spaces are values, not options.

Pure: no I/O.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tui.domain.flags.argv import NEGATIVE_NUMBER, canonical_option, is_dotted, lex

_BOOL_ACTIONS = frozenset({"boolean_optional", "store_true", "store_false"})

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
    """The introspection JSON does not describe a ``vllm serve`` parser."""


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
    ``candidates`` the option strings an ambiguous prefix could mean; ``glued`` the value of
    a single-dash option written together with it (``-qawq``: ``-q`` and ``awq``).
    """

    token: str
    option: str
    status: ResolutionStatus
    flag: CliFlag | None = None
    candidates: tuple[str, ...] = ()
    glued: str | None = None


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
        object.__setattr__(self, "_negative_like", any(NEGATIVE_NUMBER.match(o) for o in index))

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

    def only(self, dests: Iterable[str]) -> VllmCli:
        """This parser with only the flags named by ``dests`` (and ``--help``): for a program
        that accepts a subset of vLLM's options, such as the simulator."""
        keep = set(dests) | {"help"}
        return VllmCli(
            version=self.version,
            flags=tuple(f for f in self.flags if f.dest in keep),
            group_descriptions=self.group_descriptions,
        )

    # -- lookup ------------------------------------------------------------------------------
    @property
    def option_strings(self) -> tuple[str, ...]:
        """Every option string the parser registers."""
        return tuple(self._index)

    def flag(self, name: str) -> CliFlag | None:
        """The flag with this dest (``max_model_len``) or exact option (``--max-model-len``)."""
        if name in self._by_dest:
            return self._by_dest[name]
        return self._index.get(canonical_option(name))

    def resolve(self, token: str) -> Resolution:
        """What the installed ``vllm serve`` makes of ``token`` (see the module docstring)."""
        if not token.startswith("-") or NEGATIVE_NUMBER.match(token):
            return Resolution(token, token, "positional")
        return self._lookup(token, canonical_option(token))

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
        tokens = lex(argv_tokens)
        skip: set[int] = set()
        for i, token in enumerate(tokens):
            if token.option is None or i in skip:
                continue  # a value (negative numbers, text with spaces, after "--")
            if is_dotted(token.text) and token.inline is None:
                skip.add(i + 1)  # a dotted JSON arg takes the next token, always
            res = self._lookup(token.text, token.option)
            if res.status == "positional":
                continue
            problem = self._problem(token.spelled, res)
            if problem is not None:
                out.append(problem)
        return out

    def _problem(self, name: str, res: Resolution) -> OptionProblem | None:
        if res.status == "unknown":
            return self._unknown_problem(name)
        if res.status == "ambiguous":
            return OptionProblem(
                option=name,
                kind="ambiguous",
                message=f"{name}: ambiguous option: could match " + ", ".join(res.candidates),
                suggestions=res.candidates,
            )
        if res.flag is not None and res.flag.is_deprecated:
            first = res.flag.help.split("\n\n", 1)[0]
            detail = " ".join(first.split())[:200] or f"deprecated in vLLM {self.version}"
            return OptionProblem(option=name, kind="deprecated", message=f"{name}: {detail}")
        return None

    def suggest(self, option: str, n: int = 3) -> list[str]:
        """Long options spelled like ``option`` (for "did you mean")."""
        wanted = canonical_option(option)
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
            rank = _flag_rank(flag, words)
            if rank is not None:
                ranked.append((rank, position, flag))
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
        hint = REMOVED_FLAG_HINTS.get(canonical_option(name))
        suggestions = tuple(self.suggest(name))
        message = f"{name}: not an option of vllm serve {self.version}".rstrip()
        if hint:
            message += f": {hint}"
        elif suggestions:
            message += f"; did you mean {' or '.join(suggestions)}?"
        return OptionProblem(option=name, kind="unknown", message=message, suggestions=suggestions)

    def _lookup(self, token: str, arg: str) -> Resolution:
        """Python 3.11 ``ArgumentParser._parse_optional`` over this parser's options.

        ``arg`` is the canonical option name of ``token`` (:func:`canonical_option`).
        """
        index = self._index
        if len(arg) < 2 or arg[0] != "-":
            return Resolution(token, arg, "positional")
        if arg in index:
            return Resolution(token, arg, "known", index[arg])
        matches = self._option_tuples(arg)
        if len(matches) > 1:
            return Resolution(token, arg, "ambiguous", candidates=tuple(matches))
        if len(matches) == 1:
            match = matches[0]
            glued = None
            if arg[1] != "-" and match == arg[:2] and len(arg) > 2 and "=" not in token:
                glued = arg[2:]  # argparse: a short option's explicit value, "-qawq"
            return Resolution(token, match, "known", index[match], glued=glued)
        if NEGATIVE_NUMBER.match(arg) and not self._negative_like:
            return Resolution(token, arg, "positional")
        if " " in arg:
            return Resolution(token, arg, "positional")
        return Resolution(token, arg, "unknown")

    def _option_tuples(self, arg: str) -> list[str]:
        """Python 3.11 ``ArgumentParser._get_option_tuples`` (``allow_abbrev`` is on)."""
        if arg[1] == "-":
            prefix = arg.split("=", 1)[0]
            return [o for o in self._index if o.startswith(prefix)]
        short = arg[:2]
        return [o for o in self._index if o == short or o.startswith(arg)]


def _norm_word(text: str) -> str:
    return text.strip().lower().lstrip("-").replace("_", "-")


def _flag_rank(flag: CliFlag, words: Sequence[str]) -> int | None:
    """How well ``flag`` matches every one of ``words`` (its worst word), ``None`` if one misses."""
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
        rank = _word_rank(word, names, haystack)
        if rank is None:
            return None
        best = max(best, rank)
    return best


def _word_rank(word: str, names: Sequence[str], haystack: str) -> int | None:
    """0 exact name, 1 name prefix, 2 name substring, 3 group/help/choices; ``None``: no match."""
    if word in names:
        return 0
    if any(n.startswith(word) for n in names):
        return 1
    if any(word in n for n in names):
        return 2
    if word in haystack or word.replace("-", "_") in haystack:
        return 3
    return None
