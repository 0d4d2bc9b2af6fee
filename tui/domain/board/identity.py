"""Which run is which: a run's label, and whether two records are the same run."""

from __future__ import annotations

from tui.domain.results import RunRecord


def run_label(run: RunRecord) -> str:
    """A run's label, ``#id`` when it has none."""
    return run.label or (f"#{run.id}" if run.id is not None else "(new)")


def same_run(a: RunRecord, b: RunRecord) -> bool:
    """Whether ``a`` and ``b`` are the same run (the same stored id, or the same object)."""
    return a is b or (a.id is not None and a.id == b.id)
