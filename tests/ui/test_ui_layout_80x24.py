"""80x24 first (issue 17 item 4): values are never cut at the table's left edge, pre-flight
warnings sit under their field, and notices never offer a key a running sweep refuses."""

from __future__ import annotations

import re

from painted import painted
from textual.coordinate import Coordinate
from textual.pilot import Pilot
from ui_fakes import FakeSession, NoteLog, board_runs, kv_failure, populated_session

from tui.domain.events import Failed, Ready, ServerState
from tui.domain.sweep import SweepState, SweepStatus
from tui.ui.app import create_app
from tui.ui.widgets.board_grid import BoardGrid
from tui.ui.widgets.run_card import RunCard


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
            sweep_id="s",
            name="seed",
            strategy="grid",
            objective="output_throughput",
            state=SweepState.RUNNING,
        )
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


async def test_every_column_shows_whole_or_is_named_on_the_boards_edge() -> None:
    """``12.07 ~-3`` at the right edge (issue 17): at every step right, each column either
    shows its title and every value whole, or is left out and named (``→ quantization``,
    or counted: ``+3 more``, ``← 2``) on the line under the table."""
    app = create_app(populated_session(), clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("t")
        await settle(pilot)
        grid = app.query_one(BoardGrid)
        under = app.main_screen.board.query_one("#board-columns")
        steps = len(grid.ordered_columns)
        for _ in range(steps):
            lines = painted(grid)
            note = " ".join(painted(under)) if under.display else ""
            named = note.split("→", 1)[1] if "→" in note else ""
            counted = sum(int(n) for n in re.findall(r"(?:← |\+)(\d+)", note))
            missing = 0
            for index, column in enumerate(grid.ordered_columns):
                title = column.label.plain.strip()
                if f" {title} " not in f"{lines[0]} ":
                    assert title in named or counted, (title, lines[0], note)
                    missing += title not in named
                    continue
                for row in range(grid.row_count):
                    value = grid.get_cell_at(Coordinate(row, index)).plain.strip()
                    assert value in lines[row + 1], (value, lines[row + 1])
            assert missing <= counted, (missing, note)
            await pilot.press("right")
            await settle(pilot)
        await pilot.press("home", "t")  # cards: no note; the table again: its note again
        await settle(pilot)
        assert not under.display
        await pilot.press("t")
        await settle(pilot)
        assert under.display and painted(under)[0].startswith("→ ")


async def test_cards_show_every_value_whole_the_model_id_wrapped_at_its_slash() -> None:
    """The baseline's card listed ``…a-llama/Llama-3.1-8B-Instruct``: an id cut mid-value."""
    app = create_app(populated_session(), clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        bodies = {
            card.record.label: [line.strip() for line in painted(card.query_one(".card-body"))]
            for card in app.query(RunCard)
        }
        assert not any("…" in line for lines in bodies.values() for line in lines), bodies
        base = bodies["#1"]  # the baseline: the first load
        at = base.index("meta-llama/")
        assert base[at + 1] == "Llama-3.1-8B-Instruct"


async def test_the_boards_title_is_whole_at_80_columns() -> None:
    """``Runs · 3 runs · vs #3 (newest com…`` (issue 17): the title shortens by meaning."""
    app = create_app(populated_session(), clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        top = painted(app.main_screen.board)[0]
        assert "…" not in top, top
        assert "Runs · vs #1 (first load)" in top, top
    async with create_app(populated_session(), clock=None).run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        top = painted(pilot.app.main_screen.board)[0]  # type: ignore[attr-defined]
        assert "Runs · 3 runs · vs #1 (first load)" in top, top


async def test_a_failed_starts_line_in_the_server_panel_is_whole() -> None:
    """``... (3.73 GiB needed, 0.28 GiB a…`` (issue 17, seen in tmux): the Server panel's
    failure line is shortened by meaning at 80 columns; the card keeps every figure."""
    session = FakeSession(runs=board_runs()[:1], state=ServerState.READY)
    app = create_app(session, clock=None, autostart=False)
    async with app.run_test(size=(80, 24)) as pilot:
        session.state = ServerState.FAILED
        session.emit(Failed(elapsed=3.0, exit_code=1, diagnosis=kv_failure()))
        await settle(pilot)
        status = painted(app.main_screen.server_panel.query_one("#server-status"))
        line = status[1].strip()
        assert "…" not in line, status
        assert line == "max_model_len 30576 needs more KV cache than fits · its card says all"
