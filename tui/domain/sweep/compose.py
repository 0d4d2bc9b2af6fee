"""A sweep composed in the console: the form's flags and workload, a few ranges, limits.

The operator types each parameter's values as a list (``64, 128, 256``; ``fp8, auto``;
``on, off``) or a range (``0.86..0.94:0.02``: start, stop, step). Everything else comes
from the run the sweep starts from: its flags (those varied are left out of the base), its
workload. The result is an ordinary :class:`~tui.domain.sweep.spec.SweepSpec`, validated
the same way a TOML file is.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from tui.domain.flags.serve import FlagKind, ServeFlags
from tui.domain.sweep.spec import ParamRange, SweepSpec
from tui.domain.sweep.tunables import Value, check_value, kind_of, tunable_names
from tui.domain.workload import LoadSpec

TRUE_WORDS = ("true", "on", "yes", "1")
FALSE_WORDS = ("false", "off", "no", "0")


class ComposeError(ValueError):
    """What the operator typed cannot be a sweep (one line, naming the field)."""


def _typed(name: str, word: str) -> Value:
    kind = kind_of(name)
    text = word.strip()
    try:
        if kind is FlagKind.BOOL:
            if text.lower() not in TRUE_WORDS + FALSE_WORDS:
                raise ValueError(f"expected on/off, got {text!r}")
            return text.lower() in TRUE_WORDS
        if kind is FlagKind.INT:
            return int(text)
        if kind is FlagKind.FLOAT:
            return float(text)
        return text
    except ValueError as exc:
        raise ComposeError(f"{name}: {exc}") from exc


def parse_values(name: str, text: str) -> list[Value] | ParamRange:
    """``64, 128`` or ``0.86..0.94:0.02`` for parameter ``name``, each value checked."""
    if name not in tunable_names():
        raise ComposeError(f"{name!r} is not a tunable flag")
    text = text.strip()
    if not text:
        raise ComposeError(f"{name}: no values")
    if ".." in text:
        start, _, rest = text.partition("..")
        stop, _, step = rest.partition(":")
        try:
            span = ParamRange(start=float(start), stop=float(stop), step=float(step or 1))
        except (ValueError, ValidationError) as exc:
            raise ComposeError(f"{name}: range {text!r}: use start..stop:step") from exc
        values: list[Value] = list(span.values())
        result: list[Value] | ParamRange = span
    else:
        values = [_typed(name, w) for w in text.split(",") if w.strip()]
        result = values
    for value in values:
        try:
            check_value(name, value)
        except ValueError as exc:
            raise ComposeError(str(exc)) from exc
    return result


def compose(
    *,
    name: str,
    flags: ServeFlags,
    load: LoadSpec,
    strategy: str,
    objective: str,
    parameters: Mapping[str, str],
    slo: Mapping[str, float],
    max_starts: int | None,
) -> SweepSpec:
    """A spec over ``flags``/``load`` varying ``parameters`` (name -> typed values)."""
    space = {n: parse_values(n, text) for n, text in parameters.items() if n.strip()}
    if not space:
        raise ComposeError("name at least one parameter to vary")
    base = {k: v for k, v in flags.explicit().items() if k not in space and k != "port"}
    data = {
        "name": name,
        "strategy": strategy,
        "objective": objective,
        "base": {"model": flags.model, "flags": base, "extra_args": list(flags.extra_args)},
        "parameters": {
            k: (v.model_dump() if isinstance(v, ParamRange) else v) for k, v in space.items()
        },
        "workload": {"load": load.model_dump()},
        "slo": dict(slo),
        "budget": {"max_starts": max_starts},
    }
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        raise ComposeError(f"{loc}: {first.get('msg', 'invalid')}".removeprefix(": ")) from exc
