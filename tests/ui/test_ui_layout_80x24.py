"""80x24 first (issue 17 item 4): values are never cut at the table's left edge, pre-flight
warnings sit under their field, and notices never offer a key a running sweep refuses."""

from __future__ import annotations

from textual.pilot import Pilot
from ui_fakes import FakeSession, NoteLog, board_runs, kv_failure, populated_session

from tui.domain.events import Failed, Ready, ServerState
from tui.domain.sweep import SweepState, SweepStatus
from tui.ui.app import create_app
from tui.ui.widgets.board_grid import BoardGrid


async def settle(pilot: Pilot[None]) -> None:
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def test_the_table_scrolls_by_whole_columns() -> None:
    """``1.46 s`` never reads ``46 s``: each step right leaves the first scrolled column whole."""
    app = create_app(populated_session(), clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("t")
        await settle(pilot)
        grid = app.query_one(BoardGrid)
        moved = False
        for _ in range(len(grid.ordered_columns)):
            await pilot.press("right")
            await settle(pilot)
            x = round(grid.scroll_x)
            moved = moved or x > 0
            assert x in grid.column_edges() or x == round(grid.max_scroll_x), x
        assert moved  # the table is wider than 80 columns: it did scroll


async def test_preflight_warnings_sit_under_the_field_they_name() -> None:
    kv = "max_model_len 30576 cannot fit: about 21,888 tokens of KV; largest that fits: 21888"
    session = FakeSession(warnings=[kv, "pre-flight check failed: NVML not found"])
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        app.main_screen.form.field("max_model_len").set_value("30576")
        await settle(pilot)
        row = app.main_screen.form.field("max_model_len")
        under = [str(w.render()) for w in row.query(".field-warning") if w.display]
        assert under == [f"! {kv}"]
        general = str(app.main_screen.query_one("#preflight").render())
        assert "NVML not found" in general and "cannot fit" not in general


async def test_notices_never_offer_a_key_a_running_sweep_refuses() -> None:
    session = FakeSession(runs=board_runs()[:1], state=ServerState.READY)
    app = create_app(session, clock=None, autostart=False)
    notes = NoteLog(app)
    async with app.run_test(size=(80, 24)) as pilot:
        assert session.sweeps is not None
        session.sweeps.status = SweepStatus(
            sweep_id="s", name="seed", strategy="grid", objective="output_throughput",
            state=SweepState.RUNNING,
        )  # fmt: skip
        assert session.sweeps.running
        session.emit(Failed(elapsed=3.0, exit_code=1, diagnosis=kv_failure()))
        session.emit(Ready(elapsed=5.0))
        await settle(pilot)
        text = notes.text()  # the sweep screen shows each trial: no toast per start
        assert "Start failed" not in text and "f applies" not in text and "b runs" not in text
        session.sweeps.status = None
        session.emit(Failed(elapsed=3.0, exit_code=1, diagnosis=kv_failure()))
        session.emit(Ready(elapsed=5.0))
        await settle(pilot)
        text = notes.text()  # no sweep: the notices and their keys are back
        assert "f applies its fix" in text and "b runs the load" in text
