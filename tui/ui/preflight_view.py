"""Where each pre-flight warning sits in the form: under the field it is about.

A warning names the flags it concerns in vLLM's words (``max_model_len 30576 cannot fit``,
``--gpu-memory-utilization 0.9 asks for``); the first flag it names is the field it goes
under, so the message stays next to what is being edited instead of pushing it out of view.
A warning that names no field of the form stays in the form-wide box.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PlacedWarnings:
    """Warnings by field name, and those that name no field."""

    by_field: dict[str, list[str]] = field(default_factory=dict)
    general: list[str] = field(default_factory=list)


def _spellings(name: str) -> tuple[str, ...]:
    """``max_model_len``, ``--max-model-len`` and ``max-model-len``."""
    dashed = name.replace("_", "-")
    return (name, f"--{dashed}", dashed)


def place_warnings(warnings: Iterable[str], fields: Iterable[str]) -> PlacedWarnings:
    """Put each warning under the field it names first (whole-word matches only)."""
    patterns = {
        name: re.compile(
            r"(?<![\w-])(?:" + "|".join(re.escape(s) for s in _spellings(name)) + r")(?![\w-])"
        )
        for name in fields
    }
    placed = PlacedWarnings()
    for warning in warnings:
        found = [(m.start(), name) for name, p in patterns.items() if (m := p.search(warning))]
        if found:
            placed.by_field.setdefault(min(found)[1], []).append(warning)
        else:
            placed.general.append(warning)
    return placed
