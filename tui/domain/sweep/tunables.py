"""What a sweep may vary, and how one choice of values becomes a valid ``ServeFlags``.

A tunable is either a ``ServeFlags`` field (validated by ``ServeFlags`` itself: its types,
ranges and cross-field rules) or one of the LoRA flags below, which ``ServeFlags`` does not
declare and passes through as extra arguments. Those are declared here once, with vLLM
0.32's spelling, type and choices as its own parser has them (the introspected table
``tui/sim/vllm_serve_0.32.0.json``: ``--enable-lora`` is a ``BooleanOptionalAction``,
``--max-loras`` an int defaulting to 1, ``--max-lora-rank`` an int among 1, 8, 16, 32, 64,
128, 256, 320, 512 defaulting to 16).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from tui.domain.flags.serve import FlagKind, ServeFlags, flag_specs, problems_from_error

Value = int | float | str | bool
"""One parameter value as TOML gives it."""

# Declared flags a sweep never varies: where the server listens, what it is called.
NOT_TUNABLE = frozenset({"port", "host", "served_model_name"})


@dataclass(frozen=True)
class PassThrough:
    """A ``vllm serve`` flag that ``ServeFlags`` passes through, typed for sweeps."""

    name: str
    cli: str
    kind: FlagKind
    help: str
    choices: tuple[int, ...] | None = None
    ge: int | None = None

    def check(self, value: Value) -> Value:
        """``value`` typed as vLLM's parser would take it; ``ValueError`` in its words."""
        if self.kind is FlagKind.BOOL:
            if not isinstance(value, bool):
                raise ValueError(f"argument {self.cli}: expected true or false, got {value!r}")
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"argument {self.cli}: invalid int value: {value!r}")
        if self.choices is not None and value not in self.choices:
            options = ", ".join(str(c) for c in self.choices)
            raise ValueError(
                f"argument {self.cli}: invalid choice: {value} (choose from {options})"
            )
        if self.ge is not None and value < self.ge:
            raise ValueError(f"argument {self.cli}: must be >= {self.ge}, got {value}")
        return value

    def render(self, value: Value) -> list[str]:
        """This flag and ``value`` as argv tokens."""
        if self.kind is FlagKind.BOOL:
            return [self.cli] if value else ["--no-" + self.cli[2:]]
        return [self.cli, str(value)]


PASS_THROUGH: tuple[PassThrough, ...] = (
    PassThrough(
        "enable_lora",
        "--enable-lora",
        FlagKind.BOOL,
        "Serve LoRA adapters (each step runs the punica kernels).",
    ),
    PassThrough(
        "max_loras",
        "--max-loras",
        FlagKind.INT,
        "Most distinct adapters in one batch (slots of GPU memory).",
        ge=1,
    ),
    PassThrough(
        "max_lora_rank",
        "--max-lora-rank",
        FlagKind.INT,
        "Largest adapter rank served; sizes the slots and the kernels.",
        choices=(1, 8, 16, 32, 64, 128, 256, 320, 512),
    ),
)

_PASS_BY_NAME = {p.name: p for p in PASS_THROUGH}


def tunable_names() -> tuple[str, ...]:
    """Every parameter a sweep may vary, declared flags first."""
    declared = tuple(s.name for s in flag_specs() if s.name not in NOT_TUNABLE)
    return declared + tuple(_PASS_BY_NAME)


def check_value(name: str, value: Value) -> Value:
    """One value of parameter ``name``, checked alone (ranges, types, choices).

    Declared flags go through ``ServeFlags`` (pydantic coerces TOML's ints to floats where
    the flag is a float); cross-field rules need the whole choice (:func:`build_flags`).
    """
    passing = _PASS_BY_NAME.get(name)
    if passing is not None:
        return passing.check(value)
    if name not in tunable_names():
        known = ", ".join(tunable_names())
        raise ValueError(f"{name!r} is not a tunable flag (known: {known})")
    try:
        flags = ServeFlags.model_validate({"model": "-", name: value})
    except ValidationError as exc:
        raise ValueError(f"{name}: {problems_from_error(exc)[0].message}") from exc
    checked: Value = getattr(flags, name)
    return checked


def build_flags(
    model: str, settings: Mapping[str, Value], extra_args: Sequence[str] = ()
) -> ServeFlags:
    """``ServeFlags`` for ``model`` with ``settings`` (declared and pass-through names).

    Pass-through flags are rendered after ``extra_args`` in declaration order. Raises
    pydantic's ``ValidationError`` when a cross-field rule refuses the combination (the
    flag rules: such a choice is never launched).
    """
    declared: dict[str, Any] = {}
    rendered: list[str] = []
    for passing in PASS_THROUGH:
        if passing.name in settings:
            rendered.extend(passing.render(settings[passing.name]))
    for name, value in settings.items():
        if name not in _PASS_BY_NAME:
            declared[name] = value
    data = {"model": model, **declared, "extra_args": (*extra_args, *rendered)}
    return ServeFlags.model_validate(data)


def kind_of(name: str) -> FlagKind:
    """How ``name``'s values are typed."""
    passing = _PASS_BY_NAME.get(name)
    if passing is not None:
        return passing.kind
    return next(s.kind for s in flag_specs() if s.name == name)
