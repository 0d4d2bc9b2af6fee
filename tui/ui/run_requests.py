"""What the main screen does for the board's requests that need the session's tools.

The board posts ``RepeatRun`` and ``ExportRun``; the screen hands them here, and each runs
in the one guarded worker (:func:`tui.ui.workers.run_guarded`), reporting in one line.
"""

from __future__ import annotations

from textual.widget import Widget

from tui.domain.board.baseline import run_label
from tui.domain.results import RunRecord
from tui.session.port import SessionTools
from tui.ui.workers import run_guarded


def repeat_run(node: Widget, tools: SessionTools, run: RunRecord, times: int) -> None:
    """Run ``run`` again ``times`` times (same flags and workload): its noise."""
    label = run_label(run)
    node.notify(f"Repeating {label} {times}×: restart, ready, load (s stops).", title="Repeat")

    async def repeat() -> None:
        made = await tools.repeat(run, times)
        labels = " ".join(run_label(r) for r in made)
        node.notify(
            f"{label} repeated {len(made)}×: {labels}. Repeats form a group: a delta "
            "inside its spread reads as noise (~).",
            title="Repeat done",
        )

    run_guarded(node, "Repeat", repeat)


def export_run(node: Widget, tools: SessionTools, run: RunRecord, fmt: str) -> None:
    """Write ``run`` as ``fmt`` under the data dir; say where."""

    async def export() -> None:
        path = await tools.export(run, fmt)
        node.notify(f"{run_label(run)} as {fmt}: {path}", title="Exported")

    run_guarded(node, "Export", export)
