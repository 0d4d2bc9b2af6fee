"""argparse's refusals: an unknown option, a value outside the choices, a value of the wrong type.

The texts are argparse's own (stable from vLLM 0.4 to 0.32, whatever the entry point: ``vllm
serve: error:`` or ``api_server.py: error:``); only the quoting of the choices changed with
Python 3.12.8 (``(choose from 'a', 'b')`` became ``(choose from a, b)``).
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Final

from tui.domain.diagnosis import Diagnosis, Fix
from tui.domain.flags.serve import FlagSpec, flag_specs
from tui.server.diagnose.common import make, spec_by_spelling, unset_title
from tui.server.diagnose.reading import LogView, tolerant

_UNRECOGNIZED: Final = tolerant(r"unrecognized arguments:", "unrecognized arguments:")


def _did_you_mean(options: list[str]) -> dict[str, str]:
    spellings = [s for spec in flag_specs() for s in spec.spellings if s.startswith("--")]
    out: dict[str, str] = {}
    for opt in options:
        close = difflib.get_close_matches(opt.split("=", 1)[0].replace("_", "-"), spellings, 1)
        if close:
            out[opt] = close[0]
    return out


def _removal(log: LogView, tokens: list[str], options: list[str]) -> dict[str, Any]:
    """The flags that drop ``tokens``: out of the pass-through args, else the console's own."""
    flags = log.flags
    if flags is not None and flags.extra_args:
        extra = list(flags.extra_args)
        n = len(tokens)
        for i in range(len(extra) - n + 1):
            if extra[i : i + n] == tokens:
                return {"extra_args": tuple(extra[:i] + extra[i + n :])}
    fix_set: dict[str, Any] = {}
    for opt in options:  # an older vllm that lacks one of the console's own flags
        spec = spec_by_spelling(opt.split("=", 1)[0])
        if spec is not None:
            fix_set[spec.name] = None
    return fix_set


def unknown_flag(log: LogView) -> Diagnosis | None:
    """``error: unrecognized arguments: --x 3``."""
    found = log.find(_UNRECOGNIZED)
    if found is None:
        return None
    m, evidence = found
    tokens = log.line_after(m, "arguments:").split()
    if not tokens:
        return None
    options = [t for t in tokens if t.startswith("-")]
    facts: dict[str, Any] = {"arguments": tokens}
    hint = ""
    did_you_mean = _did_you_mean(options)
    if did_you_mean:
        facts["did_you_mean"] = did_you_mean
        hint = " (did you mean " + ", ".join(did_you_mean.values()) + "?)"
    dropped = " ".join(tokens)
    return make(
        log,
        "unknown_flag",
        f"vllm serve does not accept {dropped}{hint}",
        evidence,
        facts,
        [
            Fix(
                title=f"Remove `{dropped}` from the command line{hint}",
                set=_removal(log, tokens, options),
            )
        ],
    )


_INVALID_CHOICE: Final = tolerant(
    r"argument (?P<flag>[^:]{1,120}?): invalid choice: '?(?P<value>[^'(]{0,200}?)'? "
    r"\(choose from (?P<choices>[^)]{0,4000})\)",
    "invalid choice",
)
_INVALID_TYPE: Final = tolerant(
    r"argument (?P<flag>[^:]{1,120}?): invalid (?P<type>\w+) value: '?(?P<value>[^']{0,200})'?",
    ": invalid ",
)
_NOT_CONVERTIBLE: Final = tolerant(
    r"Value (?P<value>\S{1,200}?) cannot be converted to (?P<type>[^.]{1,100}?)\.",
    "cannot be converted to",
)


def best_choice(value: str, choices: list[str]) -> str | None:
    """The listed choice closest to what was typed (never the typed value itself)."""
    others = [c for c in choices if c != value]
    if not others:
        return None
    lowered = {c.lower(): c for c in others}
    if value.lower() in lowered:
        return lowered[value.lower()]
    close = difflib.get_close_matches(value, others, 1, 0.6)
    if close:
        return close[0]
    contains = [
        c for c in others if value and (value.lower() in c.lower() or c.lower() in value.lower())
    ]
    if contains:
        return min(contains, key=len)
    return difflib.get_close_matches(value, others, 1, 0.0)[0]


def _replace_in_extra(log: LogView, flag_text: str, value: str, new: str) -> dict[str, Any] | None:
    """``extra_args`` with ``value`` of the option ``flag_text`` replaced by ``new``."""
    if log.flags is None:
        return None
    names = {n for n in re.split(r"[/,\s]+", flag_text) if n.startswith("-")}
    extra = list(log.flags.extra_args)
    for i, token in enumerate(extra):
        name, eq, given = token.partition("=")
        if name in names and eq and given == value:
            extra[i] = f"{name}={new}"
            return {"extra_args": tuple(extra)}
        if token in names and i + 1 < len(extra) and extra[i + 1] == value:
            extra[i + 1] = new
            return {"extra_args": tuple(extra)}
    return None


def _choice_fixes(
    log: LogView, spec: FlagSpec | None, flag_text: str, value: str, best: str | None
) -> list[Fix]:
    fixes: list[Fix] = []
    if spec is not None:
        if best is not None:
            fixes.append(Fix(title=f"Use {spec.cli} {best}", set={spec.name: best}))
        fixes.append(Fix(title=unset_title(spec), set={spec.name: None}))
    elif best is not None:
        option = flag_text.split("/")[0].strip()
        replaced = _replace_in_extra(log, flag_text, value, best)
        fixes.append(Fix(title=f"Use {option} {best}", set=replaced or {}))
    return fixes


def invalid_choice(log: LogView) -> Diagnosis | None:
    """``argument --x: invalid choice: 'v' (choose from ...)``: the closest listed choice."""
    found = log.find(_INVALID_CHOICE, "invalid choice")
    if not found:
        return None
    m, evidence = found
    flag_text, value = m.group("flag").strip(), m.group("value").strip()
    choices = [c.strip().strip("'\"") for c in m.group("choices").split(",") if c.strip()]
    spec = spec_by_spelling(flag_text)
    best = best_choice(value, choices)
    facts: dict[str, Any] = {
        "flag": spec.name if spec else flag_text,
        "value": value,
        "choices": choices,
    }
    if best is not None:
        facts["suggested_value"] = best
    return make(
        log,
        "invalid_choice",
        f"{flag_text}: '{value}' is not one of {len(choices)} allowed values"
        + (f"; closest: {best}" if best else ""),
        evidence,
        facts,
        _choice_fixes(log, spec, flag_text, value, best),
    )


def invalid_type(log: LogView) -> Diagnosis | None:
    """``argument --x: invalid int value: 'v'`` and ``Value v cannot be converted to T.``"""
    found = log.find(_INVALID_TYPE, ": invalid ")
    if found:
        m, evidence = found
        flag_text = m.group("flag").strip()
        spec = spec_by_spelling(flag_text)
        name = spec.name if spec else flag_text
        fixes = [Fix(title=f"Unset {spec.cli}", set={spec.name: None})] if spec else []
        return make(
            log,
            "invalid_flag_value",
            f"{flag_text}: '{m.group('value')}' is not a valid {m.group('type')}",
            evidence,
            {"flag": name, "value": m.group("value"), "expected_type": m.group("type")},
            fixes,
        )
    found = log.find(_NOT_CONVERTIBLE, "cannot be converted to")
    if found:
        m, evidence = found
        return make(
            log,
            "invalid_flag_value",
            f"value {m.group('value')} cannot be converted to {m.group('type')}",
            evidence,
            {"value": m.group("value"), "expected_type": m.group("type")},
        )
    return None
