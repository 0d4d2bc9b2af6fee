"""Every flag of the simulated vLLM's ``vllm serve`` (0.32 or 0.33), and argparse's reading.

The parser's table is the domain's (:mod:`tui.domain.flags.vllm_serve_options`, generated from the
installed CPU build's ``make_arg_parser(FlexibleArgumentParser())``, reference 1.1, and
checked against it by the real-vLLM suite): declared once, shared with the console's flag
checks. The simulator accepts every one of its options, types each value the
way argparse would (``type=``, ``choices``, ``nargs``, ``BooleanOptionalAction``) and
rejects what argparse rejects, in argparse's words (Python 3.11, which vLLM 0.32 runs on).
Flags the simulator does not model are accepted and ignored, as a drop-in must.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from tui.domain.flags.humanint import parse_human_int, parse_human_int_or_auto
from tui.domain.flags.serve import ArgvError
from tui.domain.flags.vllm_cli import CliFlag, VllmCli
from tui.domain.flags.vllm_tables import table_for
from tui.domain.json_text import loads_json
from tui.sim.versions import DEFAULT_SIM_VLLM_VERSION


@cache
def serve_cli(version: str = DEFAULT_SIM_VLLM_VERSION) -> VllmCli:
    """The ``vllm serve`` flags of vLLM ``version`` (the domain's table of that version)."""
    return table_for(version).cli


def action_name(flag: CliFlag) -> str:
    """How argparse names an action in its errors: the option strings joined by ``/``."""
    return "/".join(flag.option_strings)


def _convert(flag: CliFlag, text: str) -> Any:
    """One value through the action's ``type=``; ``ArgvError`` in argparse's words."""
    if flag.optional and text in ("", "None"):
        return None  # vLLM's optional_type
    kind = flag.type_name or "str"
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        if kind == "human_readable_int":
            return parse_human_int(text)
        if kind == "human_readable_int_or_auto":
            return parse_human_int_or_auto(text)
    except ValueError as exc:
        if "Decimals" in str(exc):
            raise ArgvError(f"argument {action_name(flag)}: {exc}") from exc
        raise ArgvError(f"argument {action_name(flag)}: invalid {kind} value: {text!r}") from exc
    except OverflowError as exc:
        # vLLM's human_readable_int lets OverflowError escape as a traceback; argparse's
        # wording is the one clear line a drop-in can give instead.
        raise ArgvError(f"argument {action_name(flag)}: invalid {kind} value: {text!r}") from exc
    if kind.startswith("json") and text.lstrip().startswith(("{", "[")):
        try:
            return loads_json(text)
        except ValueError as exc:
            raise ArgvError(f"argument {action_name(flag)}: invalid loads value: {text!r}") from exc
    return text


def typed_value(flag: CliFlag, text: str) -> Any:
    """``text`` typed for ``flag`` and checked against its choices."""
    value = _convert(flag, text)
    if flag.choices is not None and value not in flag.choices:
        options = ", ".join(repr(c) for c in flag.choices)
        raise ArgvError(
            f"argument {action_name(flag)}: invalid choice: {value!r} (choose from {options})"
        )
    return value


def arity(flag: CliFlag) -> tuple[int, int | None]:
    """``(min, max)`` values the action consumes (``None``: as many as follow)."""
    nargs = flag.nargs
    if flag.is_boolean or nargs == 0:
        return 0, 0
    if nargs in (None, "1"):
        return 1, 1
    if nargs == "?":
        return 0, 1
    if nargs == "*":
        return 0, None
    if nargs == "+":
        return 1, None
    if isinstance(nargs, int):
        return nargs, nargs
    return 1, 1


def expected_message(flag: CliFlag) -> str:
    """argparse's "expected ..." error for too few values."""
    low, high = arity(flag)
    if high is None:
        return f"argument {action_name(flag)}: expected at least one argument"
    if low == 1:
        return f"argument {action_name(flag)}: expected one argument"
    return f"argument {action_name(flag)}: expected {low} arguments"


def values_for(flag: CliFlag, args: Sequence[str]) -> Any:
    """The stored value of a valued action given its argument texts."""
    low, high = arity(flag)
    typed = [typed_value(flag, a) for a in args]
    if high == 1 and low == 1:
        return typed[0]
    if high == 1:  # nargs "?": a bare option stores its const (None here)
        return typed[0] if typed else None
    return typed
