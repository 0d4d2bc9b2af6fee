"""Seed 003's Before / After table for the baseline and the sweep's best run."""

from __future__ import annotations

from rich.table import Table
from textual.widgets import Static

from tui.domain.board.baseline import run_label
from tui.domain.board.before_after import BeforeAfter
from tui.domain.flags.serve import format_value


def before_after_table(ba: BeforeAfter) -> Table:
    """``Metric | Before (#3) | After (#9) | Improvement`` and the flags that changed."""
    table = Table(expand=True, box=None, pad_edge=False)
    table.add_column("Metric", style="bold")
    table.add_column(f"Before ({run_label(ba.before)})", justify="right")
    table.add_column(f"After ({run_label(ba.after)})", justify="right")
    table.add_column("Improvement")
    for row in ba.rows:
        c = row.comparison
        table.add_row(
            row.metric.label, row.metric.format(c.reference), row.metric.format(c.value), row.change
        )
    changed = (
        ", ".join(
            f"{c.name} {format_value(c.old)} → {format_value(c.new)}" for c in ba.flag_changes
        )
        or "none"
    )
    table.caption = f"flags changed: {changed}"
    if not ba.like_for_like.ok:
        table.caption += " · not like for like: " + "; ".join(ba.like_for_like.reasons)
    return table


class SweepBeforeAfter(Static):
    """The Before / After of the sweep's baseline and best (hidden until asked for)."""

    shown: BeforeAfter | None = None
    """The pair on screen (``None``: none, the reason is shown instead)."""

    def show(self, ba: BeforeAfter | None, why: str = "") -> None:
        """Render ``ba``, or say why there is none."""
        self.shown = ba
        self.update(before_after_table(ba) if ba is not None else why)
