"""Presets as the console shows and saves them: the picker's labels, a new preset's name.

A picker entry names the preset's target, the model and the GPU it was tuned for
(``rtx3080-8b-fp8-best · Llama-3.1-8B-Instruct · rtx3080-10gb``), so a preset for another
machine is not loaded by mistake. Saving the form makes a user preset that keeps the
target of the preset it started from.
"""

from __future__ import annotations

from datetime import UTC, datetime

from tui.domain.flags.serve import ServeFlags
from tui.domain.presets import Preset
from tui.domain.workload import LoadSpec

EDITED = "edited"
NAME_CHARS = "-_."


def short_model(model: str) -> str:
    """The last part of a model id or path (``Llama-3.1-8B-Instruct``)."""
    return model.rstrip("/").rsplit("/", 1)[-1] or model


def preset_label(preset: Preset) -> str:
    """``name · model · GPU`` (the GPU when the preset names the one it was tuned for)."""
    parts = [preset.name, short_model(preset.flags.model)]
    if preset.sim_gpu:
        parts.append(preset.sim_gpu)
    return " · ".join(parts)


def edited_prompt(preset: Preset) -> str:
    """What the picker says once the form no longer holds ``preset``."""
    return f"{preset.name} ({EDITED}) · {short_model(preset.flags.model)}"


def holds(preset: Preset, flags: ServeFlags | None, workload: LoadSpec | None) -> bool:
    """Whether the form's values are still ``preset``'s (its workload, when it has one)."""
    if flags is None or flags != preset.flags:
        return False
    return preset.workload is None or workload == preset.workload


def check_preset_name(text: str) -> str | None:
    """Why ``text`` cannot name a preset file, or ``None``."""
    name = text.strip()
    if not name:
        return "a name, e.g. h100-8b-fp8-mine"
    bad = sorted({c for c in name if not (c.isalnum() or c in NAME_CHARS)})
    if bad:
        return f"letters, digits and {NAME_CHARS} only (not {' '.join(bad)})"
    return None


def preset_from_form(
    name: str,
    flags: ServeFlags,
    workload: LoadSpec | None,
    *,
    based_on: Preset | None,
    machine: str,
    now: datetime | None = None,
) -> Preset:
    """A user preset of the form's values; it keeps ``based_on``'s target GPU."""
    when = (now or datetime.now(UTC)).strftime("%Y-%m-%d")
    origin = f", edited from {based_on.name}" if based_on is not None else ""
    return Preset(
        name=name.strip(),
        description=f"Saved from the vtc console{origin}.",
        source=f"vtc console, {when}, {machine}",
        flags=flags,
        workload=workload,
        sim_gpu=based_on.sim_gpu if based_on is not None else None,
    )
