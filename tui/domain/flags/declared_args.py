"""Take the declared flags out of serve argv tokens, the way vLLM's parser would read them.

Used by the ``vtc -- serve ...`` parser and by ``ServeFlags`` itself (a declared flag given
in the extra arguments moves into its field, so it is checked like any other value and
never doubled on the command line). Tokens are lexed by :mod:`tui.domain.flags.argv`; an option
is matched as vLLM's argparse matches it (any spelling, alias, ``--no-x``, an unambiguous
abbreviation) against vLLM 0.32's parser (:mod:`tui.domain.flags.vllm_serve_options`) or an
introspected one.

A flag given twice is a problem here, though vLLM would take the last one (with only a
warning, "Found duplicate keys"): vtc never launches a command line whose two values for
one flag disagree with what its card shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tui.domain.flags.argv import ArgToken, lex, take_values
from tui.domain.flags.problems import ArgvError, FlagProblem, shown_value
from tui.domain.flags.spec import FlagKind, FlagSpec
from tui.domain.flags.vllm_cli import VllmCli

MULTI_VALUE = frozenset({"served_model_name"})
"""Declared flags whose vLLM option takes several values (``nargs="+"``); vtc keeps one."""


@dataclass
class DeclaredSplit:
    """Declared flags found in argv tokens, and everything else in order.

    ``values``: typed, by ``ServeFlags`` name (``None`` for an optional flag given as
    ``None``); ``given``: each one's tokens as written; ``model``: the first positional
    (only when asked for); ``rest``: every other token, verbatim.
    """

    values: dict[str, Any] = field(default_factory=dict)
    given: dict[str, str] = field(default_factory=dict)
    rest: list[str] = field(default_factory=list)
    model: str | None = None
    problems: list[FlagProblem] = field(default_factory=list)
    last_wins: bool = False


def split_declared(
    tokens: Sequence[str],
    specs: Sequence[FlagSpec],
    cli: VllmCli,
    *,
    take_model: bool = False,
    last_wins: bool = False,
) -> DeclaredSplit:
    """Split ``tokens`` (what follows ``vllm serve``) into declared flags and the rest.

    ``take_model``: the first positional token is the model (``vllm serve MODEL``); else
    positionals stay in ``rest``. ``last_wins``: a flag given twice takes its last value, as
    vLLM does (the simulator's reading); else it is a problem (vtc's). Problems (bad
    values, a flag given twice) are collected, not raised.
    """
    by_dest = {s.name: s for s in specs}
    lexed = lex(tokens)
    out = DeclaredSplit(last_wins=last_wins)
    i = 0
    while i < len(lexed):
        token = lexed[i]
        if token.option is None:
            if take_model and out.model is None:
                out.model = token.text
            else:
                out.rest.append(token.text)
            i += 1
            continue
        resolution = cli.resolve(token.text)
        flag = resolution.flag if resolution.status == "known" else None
        spec = by_dest.get(flag.dest) if flag is not None else None
        if spec is None:
            nargs = flag.nargs if flag is not None else "?"
            count = _value_count(lexed, i, nargs, resolution.glued)
            out.rest.extend(t.text for t in lexed[i : i + 1 + count])
            i += 1 + count
            continue
        negated = resolution.option.startswith("--no-")
        i += 1 + _declared(out, lexed, i, spec, negated=negated, glued=resolution.glued)
    return out


def _value_count(
    lexed: Sequence[ArgToken], i: int, nargs: str | int | None, glued: str | None = None
) -> int:
    """How many following tokens the option at ``i`` consumes (0 with an inline value)."""
    if lexed[i].inline is not None or glued is not None:
        return 0
    return len(take_values(lexed, i, nargs))


def _declared(
    out: DeclaredSplit,
    lexed: Sequence[ArgToken],
    i: int,
    spec: FlagSpec,
    *,
    negated: bool,
    glued: str | None,
) -> int:
    """Read one declared flag at ``lexed[i]`` into ``out``; returns the values consumed."""
    token = lexed[i]
    inline = token.inline if token.inline is not None else glued
    if spec.kind is FlagKind.BOOL:
        written = token.spelled
        if inline is not None:
            detail = f"ignored explicit argument {inline!r}"
            _problem(out, spec, ArgvError(f"argument {spec.argparse_name}: {detail}"))
            return 0
        _store(out, spec, not negated, written)
        return 0
    nargs = "+" if spec.name in MULTI_VALUE else None
    values = [inline] if inline is not None else take_values(lexed, i, nargs)
    consumed = 0 if inline is not None else len(values)
    written = " ".join([token.spelled, *values])
    if not values:
        expected = "at least one argument" if nargs == "+" else "one argument"
        _problem(out, spec, ArgvError(f"argument {spec.argparse_name}: expected {expected}"))
        return consumed
    if len(values) > 1:
        shown = ", ".join(shown_value(v) for v in values)
        out.problems.append(
            FlagProblem(
                spec.name,
                f"vtc serves one name; got {len(values)} ({shown})",
                spec.cli,
                " ".join(values),
            )
        )
        return consumed
    try:
        value = spec.parse_arg(values[0])
    except ArgvError as exc:
        _problem(out, spec, exc)
        return consumed
    _store(out, spec, value, written)
    return consumed


def _store(out: DeclaredSplit, spec: FlagSpec, value: Any, written: str) -> None:
    if spec.name in out.given and not out.last_wins:
        first = out.given[spec.name]
        out.problems.append(
            FlagProblem(
                spec.name,
                f"given twice ({first!r}, then {written!r}); vLLM would use the last one "
                "silently: keep one",
                spec.cli,
            )
        )
        return
    out.given[spec.name] = written
    out.values[spec.name] = value


def _problem(out: DeclaredSplit, spec: FlagSpec, exc: ArgvError) -> None:
    for problem in exc.problems:
        out.problems.append(FlagProblem(spec.name, problem.message))
