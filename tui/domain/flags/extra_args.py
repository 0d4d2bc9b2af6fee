"""The extra arguments of a serve command line, checked the way vLLM's parser checks them.

vtc passes the form's extra arguments to ``vllm serve`` verbatim; here they are read first
with vLLM's parser table (introspected, or vLLM 0.32's shipped one): every option must be
known (or an unambiguous abbreviation), get the number of values its ``nargs`` asks for,
and each value must type as argparse types it (``int``, ``float``, vLLM's human-readable
ints, JSON, choices). Messages are argparse's (``argument --seed: invalid int value: 'x'``,
``unrecognized arguments: --no-such-flag``, ``ambiguous option: ...``). Then the
frontend's own pre-start checks run (``validate_parsed_serve_args``,
``entrypoints/launchers/cli_args.py:502-541``).

A dotted JSON key (``-cc.mode 3``) is only checked for having its value: vLLM assembles the
JSON itself and validates it against its config class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tui.domain.flags.argv import OPTIMIZATION_LEVEL, ArgToken, is_dotted, lex, take_values
from tui.domain.flags.humanint import parse_human_int, parse_human_int_or_auto
from tui.domain.flags.problems import FlagProblem
from tui.domain.flags.vllm_cli import CliFlag, Resolution, VllmCli
from tui.domain.json_text import loads_json

_SWITCHES = frozenset({"boolean_optional", "store_true", "store_false", "store_const", "count"})
FIELD = "extra_args"


@dataclass
class ExtraCheck:
    """What the extra arguments say: typed values by dest, and the problems found.

    ``unrecognized`` holds the tokens argparse would list as "unrecognized arguments" (the
    first problem says the same in words).
    """

    values: dict[str, Any] = field(default_factory=dict)
    problems: list[FlagProblem] = field(default_factory=list)
    unrecognized: list[str] = field(default_factory=list)
    bounds: Mapping[str, tuple[str, Mapping[str, float]]] = field(default_factory=dict)
    literals: Mapping[str, tuple[str, Mapping[str, tuple[str, ...]]]] = field(default_factory=dict)


def extra_args_problems(
    extra: Sequence[str],
    cli: VllmCli,
    *,
    last_wins: bool = False,
    bounds: Mapping[str, tuple[str, Mapping[str, float]]] | None = None,
    literals: Mapping[str, tuple[str, Mapping[str, tuple[str, ...]]]] | None = None,
) -> ExtraCheck:
    """Check ``extra`` (tokens after ``vllm serve MODEL`` and the declared flags).

    ``last_wins``: an option given twice keeps its last value, as vLLM does (the
    simulator's reading); else that is a problem (vtc's: never silently doubled).
    ``bounds``: each option's range as its vLLM config class declares it (``{dest:
    (class, {"ge": 1})}``, :data:`tui.domain.flags.vllm_serve_options.BOUNDS` for vLLM 0.32).
    ``literals``: the allowed values of the JSON config options' fields (``{dest: (class,
    {field: values})}``), e.g. the speculative ``method``s of that vLLM version.
    """
    out = ExtraCheck(bounds=bounds or {}, literals=literals or {})
    tokens = lex(extra)
    stray: list[str] = []
    seen: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.option is None:
            stray.append(token.text)
            i += 1
            continue
        # "-O 3": the lexer already read it as --optimization-level
        res = cli.resolve(OPTIMIZATION_LEVEL if token.option == OPTIMIZATION_LEVEL else token.text)
        if res.status != "known" or res.flag is None:
            if res.status == "ambiguous":
                matches = ", ".join(res.candidates)
                out.problems.append(
                    FlagProblem(FIELD, f"ambiguous option: {token.spelled} could match {matches}")
                )
            else:
                stray.append(token.spelled)
            i += 1
            continue
        i += 1 + _option(out, tokens, i, res, None if last_wins else seen)
    out.problems.extend(frontend_problems(out.values))
    out.unrecognized = stray
    if stray:  # argparse's words, after parsing, for unknown options and stray values
        out.problems.append(FlagProblem(FIELD, "unrecognized arguments: " + " ".join(stray)))
    return out


def _option(
    out: ExtraCheck,
    tokens: Sequence[ArgToken],
    i: int,
    res: Resolution,
    seen: dict[str, str] | None,
) -> int:
    """Check one known option at ``tokens[i]``; returns how many values it consumed."""
    token = tokens[i]
    flag = res.flag
    assert flag is not None
    name = "/".join(flag.option_strings)
    inline = token.inline if token.inline is not None else res.glued
    if flag.action in _SWITCHES or flag.nargs == 0:
        _switch(out, res, token.spelled, inline, seen)
        return 0
    if is_dotted(token.text):
        values = take_values(tokens, i, None)
        if not values:
            out.problems.append(
                FlagProblem(FIELD, f"argument {token.spelled}: expected one argument")
            )
        return 0 if token.inline is not None else len(values)
    values = [inline] if inline is not None else take_values(tokens, i, flag.nargs)
    consumed = 0 if inline is not None else len(values)
    count_problem = _count_problem(name, flag.nargs, len(values))
    if count_problem:
        out.problems.append(FlagProblem(FIELD, count_problem))
        return consumed
    if not values and flag.nargs == "?":
        # argparse stores the action's const; vLLM's one such flag, --hf-token, has
        # const=True ("use the token from `huggingface-cli login`").
        out.values[flag.dest] = True
        _once(out, flag, token.spelled, seen)
        return consumed
    typed = _typed(out, flag, name, values)
    if typed is None:
        return consumed
    out.values[flag.dest] = typed if flag.nargs in ("+", "*") else typed[0]
    if flag.action != "append":
        _once(out, flag, " ".join([token.spelled, *values]), seen)
    return consumed


def _switch(
    out: ExtraCheck, res: Resolution, spelled: str, inline: str | None, seen: dict[str, str] | None
) -> None:
    """A switch (``--flag`` / ``--no-flag``): it takes no value (argparse's words if given one)."""
    flag = res.flag
    assert flag is not None
    if inline is not None:
        name = "/".join(flag.option_strings)
        out.problems.append(
            FlagProblem(FIELD, f"argument {name}: ignored explicit argument {inline!r}")
        )
        return
    out.values[flag.dest] = not flag.is_negative(res.option)
    _once(out, flag, spelled, seen)


def _typed(out: ExtraCheck, flag: CliFlag, name: str, values: Sequence[str]) -> list[Any] | None:
    """``values`` converted by the flag's type and checked against its config's range and
    literals; ``None`` (and the problem added) at the first refused value."""
    typed = []
    for value in values:
        problem, converted = type_value(flag, value)
        if problem:
            out.problems.append(FlagProblem(FIELD, f"argument {name}: {problem}"))
            return None
        limit = out_of_bounds(out.bounds.get(flag.dest), converted) or not_a_literal(
            out.literals.get(flag.dest), converted
        )
        if limit:
            out.problems.append(FlagProblem(FIELD, limit, flag.name, value))
            return None
        typed.append(converted)
    return typed


def out_of_bounds(bound: tuple[str, Mapping[str, float]] | None, value: Any) -> str | None:
    """pydantic's words when ``value`` breaks its config field's range (``None`` if not)."""
    if bound is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    config, limits = bound
    # Written as pydantic compares, so NaN breaks every limit as it does there.
    checks = (
        ("ge", lambda v, x: v >= x, "greater than or equal to"),
        ("gt", lambda v, x: v > x, "greater than"),
        ("le", lambda v, x: v <= x, "less than or equal to"),
        ("lt", lambda v, x: v < x, "less than"),
    )
    for key, ok, words in checks:
        if key in limits and not ok(value, limits[key]):
            limit = limits[key]
            shown = int(limit) if float(limit).is_integer() else limit
            return f"Input should be {words} {shown} ({config})"
    return None


def not_a_literal(
    literal: tuple[str, Mapping[str, tuple[str, ...]]] | None, value: Any
) -> str | None:
    """pydantic's words when a JSON config sets a field to a value its ``Literal`` lacks.

    ``1 validation error for SpeculativeConfig / method / Input should be 'ngram', ... or
    'dspark' [type=literal_error, input_value='medusa', input_type=str]`` on one line: how
    vLLM 0.33 refuses ``--speculative-config '{"method": "medusa"}'`` (medusa was removed).
    """
    if literal is None or not isinstance(value, dict):
        return None
    config, fields = literal
    for name, allowed in fields.items():
        got = value.get(name)
        if name in value and got is not None and got not in allowed:
            quoted = [repr(v) for v in allowed]
            expected = quoted[-1] if len(quoted) == 1 else ", ".join(quoted[:-1])
            expected += "" if len(quoted) == 1 else " or " + quoted[-1]
            return (
                f"1 validation error for {config}: {name}: Input should be {expected} "
                f"[type=literal_error, input_value={got!r}, input_type={type(got).__name__}]"
            )
    return None


def _once(out: ExtraCheck, flag: CliFlag, written: str, seen: dict[str, str] | None) -> None:
    if seen is None:
        return
    first = seen.get(flag.dest)
    if first is not None:
        out.problems.append(
            FlagProblem(
                FIELD,
                f"{flag.name} given twice ({first!r}, then {written!r}); vLLM would use the "
                "last one silently: keep one",
            )
        )
    seen[flag.dest] = written


def _count_problem(name: str, nargs: str | int | None, got: int) -> str | None:
    """argparse's ``_match_argument`` errors."""
    if nargs is None and got != 1:
        return f"argument {name}: expected one argument"
    if nargs == "+" and got < 1:
        return f"argument {name}: expected at least one argument"
    if isinstance(nargs, int) and got != nargs:
        return f"argument {name}: expected {nargs} argument{'s' if nargs != 1 else ''}"
    return None


def type_value(flag: CliFlag, text: str) -> tuple[str | None, Any]:
    """``(problem, value)``: one value typed as vLLM's argparse types it for ``flag``."""
    if flag.optional and text in ("", "None"):
        return None, None
    try:
        value = _convert(flag.type_name, text)
    except (ValueError, OverflowError) as exc:
        detail = str(exc) if isinstance(exc, _OwnWords) else ""
        if detail:
            return detail, None
        if flag.optional:
            return f"Value {text} cannot be converted to {flag.type_name}.", None
        return f"invalid {flag.type_name} value: {text!r}", None
    if flag.choices is not None and value not in flag.choices:
        options = ", ".join(repr(c) for c in flag.choices)
        return f"invalid choice: {value!r} (choose from {options})", None
    return None, value


class _OwnWords(ValueError):
    """A conversion error whose text argparse prints as is."""


def _convert(type_name: str | None, text: str) -> Any:
    if type_name == "int":
        return int(text)
    if type_name == "float":
        return float(text)
    if type_name in ("human_readable_int", "human_readable_int_or_auto"):
        try:
            if type_name == "human_readable_int":
                return parse_human_int(text)
            return parse_human_int_or_auto(text)
        except ValueError as exc:
            if "Decimals" in str(exc) or "too large" in str(exc):
                raise _OwnWords(str(exc)) from exc
            raise
    if type_name is not None and type_name.startswith("json") and type_name != "json_or_str":
        return loads_json(text)  # ValueError (JSONDecodeError) when it is no JSON
    return text


def frontend_problems(values: dict[str, Any]) -> list[FlagProblem]:
    """``validate_parsed_serve_args`` and ``serve``'s own pre-start checks, vLLM's words."""
    out: list[str] = []
    if values.get("enable_auto_tool_choice") and not values.get("tool_call_parser"):
        out.append("Error: --enable-auto-tool-choice requires --tool-call-parser")
    if values.get("enable_log_outputs") and not values.get("enable_log_requests"):
        out.append("Error: --enable-log-outputs requires --enable-log-requests")
    keep_alive = values.get("sse_keep_alive_interval")
    if isinstance(keep_alive, int) and keep_alive < 0:
        out.append(
            "Error: --sse-keep-alive-interval must be a non-negative integer (0 disables "
            "keep-alive comments)."
        )
    if values.get("enable_per_request_metrics") and values.get("disable_log_stats"):
        out.append(
            "Error: --enable-per-request-metrics requires engine statistics logging; remove "
            "--disable-log-stats to enable per-request metrics."
        )
    servers = values.get("api_server_count")
    if values.get("headless") and isinstance(servers, int) and servers > 0:
        out.append(
            f"--api-server-count={servers} cannot be used with --headless (no API servers are "
            "started in headless mode)."
        )
    return [FlagProblem(FIELD, message) for message in out]
