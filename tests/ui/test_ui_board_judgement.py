"""The board judges each change (issue 39, item 3), in the console: the card's and Before /
After's verdict line, ←/→ scrolling the table's columns, four metric columns at 120x40 and a
failed start's state in sight."""

from __future__ import annotations

from typing import Any

from fakes.runs import served_run
from textual.pilot import Pilot
from textual.widgets import Static
from ui_fakes import BOARD_LOAD, board_session, three_session_runs

from tui.domain.board.table import ColumnKind
from tui.ui.app import create_app
from tui.ui.widgets.board_grid import BoardGrid
from tui.ui.widgets.run_card import RunCard


async def settle(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def walk_runs() -> list[Any]:
    """The walk of issue 39: TTFT p99 0.4% lower, ITL p99 24.1% higher, tok/s flat."""
    base = served_run(
        1, tput=1000.0, ttft_p99=100.0, itl_p99=40.0, workload=BOARD_LOAD, max_num_seqs=128
    )
    run = served_run(
        2, tput=1004.0, ttft_p99=99.6, itl_p99=49.64, workload=BOARD_LOAD, max_num_seqs=256
    )
    return [base, run]


def note_text(app: Any) -> str:
    return str(app.query_one("#board-columns", Static).render())


async def test_the_card_says_worse_by_itl_p99_and_v_lists_it_first() -> None:
    app = create_app(board_session(walk_runs()), clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        bodies = [str(c.query_one(".card-body").render()) for c in app.query(RunCard)]
        assert "worse · out tok/s ~+0.4%" in bodies[-1]
        assert "worst ITL p99 +24.1%" in bodies[-1]
        assert "TTFT p99     99.6 ms ~-0.4%" in bodies[-1]  # grey: inside the noise band
        await pilot.press("v")
        await settle(pilot)
        text = str(app.screen.query_one("#ba-table").render())
        assert text.splitlines()[0].startswith("worse · out tok/s ~+0.4%")
        rows = [line.split()[0] for line in text.splitlines()[4:7]]
        assert rows[0] == "ITL"  # worse first; it was left out before
        assert "0.4% faster (noise)" in text


async def test_left_and_right_scroll_the_table_by_a_column() -> None:
    app = create_app(board_session(walk_runs()), clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("t")
        await settle(pilot)
        assert not note_text(app).startswith("←")
        grid = app.query_one(BoardGrid)
        shown_before = grid.scroll_x
        await pilot.press("right")
        await settle(pilot)
        assert note_text(app).startswith("← 1 ·") and grid.scroll_x > shown_before
        await pilot.press("right")
        await settle(pilot)
        assert note_text(app).startswith("← 2 ·")
        await pilot.press("left")
        await settle(pilot)
        assert note_text(app).startswith("← 1 ·")


async def test_the_table_fits_four_metric_columns_at_120x40_and_a_failed_state() -> None:
    app = create_app(board_session(three_session_runs()), clock=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("t")
        await settle(pilot)
        grid = app.query_one(BoardGrid)
        table = grid.table
        assert table is not None
        assert sum(1 for c in grid.shown_columns if c.kind is ColumnKind.METRIC) >= 4
        verdicts = [str(grid.get_cell_at((i, table.index("verdict")))) for i in range(3)]
        assert "failed" in verdicts


def test_the_run_in_full_says_what_an_unrepeated_verdict_lacks_and_the_verdict() -> None:
    """Issue 39: "gain (one run each: n repeats)" read as a placeholder."""
    from tui.domain.board.view import BoardView, build_board
    from tui.ui.run_detail_text import metric_lines, summary_lines

    board = build_board(walk_runs(), BoardView())
    row = board.table.rows[-1]
    text = "\n".join(line.plain for line in metric_lines(row, board.table.columns))
    assert "loss (not repeated yet: n runs it again)" in text  # ITL p99 +24.1%
    assert "one run each" not in text
    summary = "\n".join(line.plain for line in summary_lines(row, "#1"))
    assert "worse · out tok/s ~+0.4%" in summary and "worst ITL p99 +24.1%" in summary
