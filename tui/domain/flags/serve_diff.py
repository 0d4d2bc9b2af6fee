"""What differs between two runs' flags: each flag whose effective value changed, the model,
the extra arguments and the environment included (the board's diff, a fix's change)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tui.domain.flags.run_env import ENV_FIELD, env_text
from tui.domain.flags.serve import ServeFlags, flag_specs


@dataclass(frozen=True)
class FlagChange:
    """One flag whose effective value differs between two runs."""

    name: str
    old: Any
    new: Any


def diff_flags(old: ServeFlags, new: ServeFlags) -> list[FlagChange]:
    """Flags whose effective value differs, model, extra args and the environment included.

    Compares effective values, so an unset flag equals one set to vLLM's default.
    """
    changes: list[FlagChange] = []
    if old.model != new.model:
        changes.append(FlagChange("model", old.model, new.model))
    for spec in flag_specs():
        a, b = old.effective(spec.name), new.effective(spec.name)
        if a != b:
            changes.append(FlagChange(spec.name, a, b))
    if old.extra_args != new.extra_args:
        changes.append(FlagChange("extra_args", " ".join(old.extra_args), " ".join(new.extra_args)))
    if old.env != new.env:
        changes.append(
            FlagChange(ENV_FIELD, env_text(old.env) or "none", env_text(new.env) or "none")
        )
    return changes
