"""The console marks a sweep's probe loads (issue 17): each further load on a trial's
server reads ``probe 2 of #5`` on its card and ``t2 p2`` in the table, and the board's
automatic baseline is never one of them."""

from __future__ import annotations

from fakes.runs import trial_and_probes
from ui_fakes import FakeSession

from tui.ui.app import create_app
from tui.ui.widgets.board_grid import BoardGrid
from tui.ui.widgets.run_card import RunCard


async def test_probes_read_as_probes_of_their_trial_and_are_never_the_baseline() -> None:
    session = FakeSession(runs=trial_and_probes())
    app = create_app(session, clock=None, autostart=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        board = app.main_screen.board
        assert board.board is not None and board.board.baseline is not None
        assert board.board.baseline.run.id == 5
        cards = {
            c.record.label: str(c.query_one(".card-body").render()) for c in app.query(RunCard)
        }
        assert "trial 2 · probe 2 of #5" in cards["#6"] and "probe 3 of #5" in cards["#7"]
        assert "probe" not in cards["#5"] and "the board's baseline" in cards["#5"]
        board.focus()
        await pilot.press("t")
        await pilot.pause()
        grid = app.query_one(BoardGrid)
        labels = [str(grid.get_cell_at((row, 0))) for row in range(grid.row_count)]
        assert [label.strip(" ▸") for label in labels] == ["#5 base t2", "#6 t2 p2", "#7 t2 p3"]
