"""SVG snapshots of the board at 80x24 and 120x40: cards, table, plot, a run in full, and the
key bar while a form field has focus.

The scene is issue 10's: three runs from three console sessions (two served with different
flags, one failed start), the second with its startup profile, telemetry series and log.
Regenerate with ``pytest tests/ui/test_ui_board_snapshots.py --snapshot-update`` and look at
the report before keeping.
"""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input
from ui_fakes import board_session, detailed_run, three_session_runs

from tui.domain.log_tail import LogTail
from tui.ui.app import VtcApp, create_app

SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])


def scene() -> VtcApp:
    runs = three_session_runs()
    runs[1] = detailed_run(runs[1])
    session = board_session(runs)
    lines = tuple(f"INFO 01-01 00:00:{i:02d} [engine.py:{100 + i}] step {i}" for i in range(30))
    session.tools.logs[2] = LogTail(lines, "the last 30 lines of /data/vtc/logs/run-2.log")
    return create_app(session, clock=None)


async def settled(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


@SIZES
def test_board_cards_snapshot(snap_compare: Any, size: tuple[int, int]) -> None:
    """The cards, the second run (the baseline) selected."""

    async def select(pilot: Pilot[Any]) -> None:
        await pilot.press("left")
        await settled(pilot)

    assert snap_compare(scene(), terminal_size=size, run_before=select)


@SIZES
def test_board_table_snapshot(snap_compare: Any, size: tuple[int, int]) -> None:
    """The table: differing flags as columns, the failure's cause, #1 pinned."""

    async def table(pilot: Pilot[Any]) -> None:
        for key in ("t", "ctrl+home", "p"):  # each settled: the table is drawn before the next
            await pilot.press(key)
            await settled(pilot)

    assert snap_compare(scene(), terminal_size=size, run_before=table)


@SIZES
def test_board_table_scrolled_snapshot(snap_compare: Any, size: tuple[int, int]) -> None:
    """The table after → twice: the columns scrolled by two, the note naming both sides."""

    async def scrolled(pilot: Pilot[Any]) -> None:
        await pilot.press("t")
        await settled(pilot)
        for _ in range(2):  # each settled: the columns are fitted before the next
            await pilot.press("right")
            await settled(pilot)

    assert snap_compare(scene(), terminal_size=size, run_before=scrolled)


@SIZES
def test_board_plot_snapshot(snap_compare: Any, size: tuple[int, int]) -> None:
    """The scatter with its frontier, the baseline marked B."""

    async def plot(pilot: Pilot[Any]) -> None:
        await pilot.press("g")
        await settled(pilot)

    assert snap_compare(scene(), terminal_size=size, run_before=plot)


@SIZES
def test_run_detail_snapshot(snap_compare: Any, size: tuple[int, int]) -> None:
    """The second run in full, scrolled down a page (startup, charts)."""

    async def detail(pilot: Pilot[Any]) -> None:
        await pilot.press("left", "enter")
        await settled(pilot)
        await pilot.press("pagedown")
        await settled(pilot)

    assert snap_compare(scene(), terminal_size=size, run_before=detail)


@SIZES
def test_key_bar_with_a_field_focused_snapshot(snap_compare: Any, size: tuple[int, int]) -> None:
    """A form field focused: the key bar lists the F-keys and Esc, the field stands out."""

    async def focus_field(pilot: Pilot[Any]) -> None:
        await settled(pilot)
        form = pilot.app.main_screen.form  # type: ignore[attr-defined]
        field = form.field("max_num_seqs").editor
        assert isinstance(field, Input)
        field.cursor_blink = False  # the cursor drawn steadily: a blink phase is not the scene
        form.focus_field("max_num_seqs")
        await settled(pilot)
        assert pilot.app.focused is field

    assert snap_compare(scene(), terminal_size=size, run_before=focus_field)
