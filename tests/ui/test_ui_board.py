"""The results board in the console: cards and table, baseline, filter, sort, the run in full.

The first test is issue 10's "done when" scene: three runs from three console sessions (two
served with different flags, one failed start), driven by keys only at 80x24.
"""

from __future__ import annotations

from typing import Any

from fakes.waiting import until
from textual.pilot import Pilot
from textual.widgets import Footer, Input
from ui_fakes import (
    FIXED_TIME,
    MODEL,
    FakeSession,
    NoteLog,
    board_session,
    detailed_run,
    help_lines,
    many_runs,
    three_session_runs,
)

from tui.domain.board.baseline import BaselineReason
from tui.domain.board.saved import SavedBoard
from tui.domain.events import ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.log_tail import LogTail
from tui.domain.results import RunRecord, RunStatus, StartupProfile, SweepTag
from tui.ui.app import VtcApp, create_app
from tui.ui.screens.run_detail import RunDetailScreen
from tui.ui.widgets.board_grid import BoardGrid
from tui.ui.widgets.results_board import ResultsBoard
from tui.ui.widgets.run_card import RunCard


def board_of(app: VtcApp) -> ResultsBoard:
    return app.main_screen.board


def grid_of(app: VtcApp) -> BoardGrid:
    return app.query_one(BoardGrid)


def row_labels(app: VtcApp) -> list[str]:
    board = board_of(app).board
    assert board is not None
    return [r.label for r in board.table.rows]


async def settle(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def cursor_to_column(pilot: Pilot[Any], key: str) -> None:
    """Move the table's cursor right until it is on column ``key``."""
    grid = grid_of(pilot.app)  # type: ignore[arg-type]
    await pilot.press("home")
    for _ in range(40):
        column = grid.board_column
        if column is not None and column.key == key:
            return
        await pilot.press("right")
    raise AssertionError(f"no column {key}")


async def cursor_to_run(pilot: Pilot[Any], label: str) -> None:
    """Move the table's cursor to the row of run ``label``."""
    grid = grid_of(pilot.app)  # type: ignore[arg-type]
    await pilot.press("ctrl+home")
    for _ in range(40):
        row = grid.cursor_row_data
        if row is not None and row.label == label:
            return
        await pilot.press("down")
    raise AssertionError(f"no run {label}")


async def test_issue_10_done_when_three_sessions_by_keys_at_80x24() -> None:
    session = board_session()
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        board = board_of(app)
        await pilot.press("t")
        await pilot.pause()
        assert board.table_mode and app.focused is grid_of(app)
        # all three, the differing flags as columns, the failure's cause as its state
        assert row_labels(app) == ["#1", "#2", "#3"]
        table = grid_of(app).table
        assert table is not None
        keys = [c.key for c in table.columns]
        for flag in ("max_model_len", "enable_prefix_caching", "max_num_seqs"):
            assert f"flag:{flag}" in keys
        assert grid_of(app).row_count == 3
        states = [r.state for r in table.rows]
        assert states[2] == "failed: kv_cache_too_small"
        # the default baseline: the first completed load, and the title says so
        assert board.board is not None and board.board.baseline is not None
        assert board.board.baseline.label == "#1"
        assert "vs #1 (first load)" in str(board.border_title)

        # sort by output throughput, descending: #2 (905), #1 (640), the failure (N/A) last
        await cursor_to_column(pilot, "metric:output_throughput")
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert row_labels(app) == ["#2", "#1", "#3"]
        assert "sort out tok/s ↓" in str(board.border_title)
        await pilot.press("left_square_bracket")
        await pilot.pause()
        assert row_labels(app) == ["#1", "#2", "#3"]

        # pin #1: every delta and flag diff is against it, the title says so
        await cursor_to_run(pilot, "#1")
        await pilot.press("p")
        await pilot.pause()
        base = board.board.baseline if board.board else None
        assert base is not None and base.label == "#1" and base.reason is BaselineReason.PINNED
        assert "vs #1 (pinned)" in str(board.border_title)
        second = next(r for r in board.board.table.rows if r.label == "#2")  # type: ignore[union-attr]
        assert {c.name for c in second.flag_changes} == {"max_num_seqs", "enable_prefix_caching"}

        # filter: served only, then failed only, then all again
        for text, expected in (("served", ["#1", "#2"]), ("failed", ["#3"]), ("", None)):
            await pilot.press("slash")
            await pilot.pause()
            field = app.screen.query_one(Input)
            field.value = text
            await pilot.press("enter")
            await pilot.pause()
            assert row_labels(app) == (expected or ["#1", "#2", "#3"])

        # the selected run's full card scrolls with the keyboard
        await cursor_to_run(pilot, "#2")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, RunDetailScreen)
        scroller = app.screen.query_one("#detail")
        assert scroller.max_scroll_y > 0 and scroller.scroll_y == 0
        await pilot.press("pagedown")
        await pilot.pause()
        assert scroller.scroll_y > 0
        await pilot.press("end")
        await pilot.pause()
        assert scroller.scroll_y == scroller.max_scroll_y
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.main_screen


async def test_the_table_shows_at_least_eight_rows_at_80x24_and_its_columns_scroll() -> None:
    session = board_session(many_runs(14))
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("t")
        await pilot.pause()
        grid = grid_of(app)
        visible_rows = grid.scrollable_content_region.height - 1  # less the header
        assert visible_rows >= 8
        assert grid.max_scroll_x > 0  # more columns than fit: they scroll
        # the form gives its width to the table at 80 columns, and comes back with t
        assert not app.main_screen.form.display
        await pilot.press("t")
        await pilot.pause()
        assert app.main_screen.form.display and not board_of(app).table_mode


async def test_cards_select_and_scroll_by_keyboard() -> None:
    session = board_session()
    session.tools.board = SavedBoard(pinned=2)  # a pin the last console left: #3's diff is long
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        board = board_of(app)
        assert board.view.pinned == 2  # restored
        assert board.has_focus_within  # its focus holder: the board's keys act
        cards = list(app.query(RunCard))
        assert [c.has_class("-selected") for c in cards] == [False, False, True]
        failed = cards[2]  # the newest, selected: a failure with two fixes, taller than 80x24
        assert failed.max_scroll_y > 0
        await pilot.press("down", "down")
        await pilot.pause()
        assert failed.scroll_y == 2
        await pilot.press("home")
        await pilot.pause()
        assert board.view.selected == 1 and cards[0].has_class("-selected")
        await pilot.press("right")
        await pilot.pause()
        assert board.view.selected == 2
        strip = app.query_one("#board-cards")
        assert strip.region.contains_region(cards[1].region)
        await pilot.press("end")
        await pilot.pause()
        assert board.view.selected == 3


async def test_paging_the_cards_keeps_the_selected_card_whole_in_view() -> None:
    """ctrl+PgUp / ctrl+PgDn move a screenful of runs, and the selected card is shown whole
    (not left a column or two off), at 80 and at 120 columns."""
    for size in ((80, 24), (120, 40)):
        app = create_app(board_session(many_runs(12)), clock=None)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            board = board_of(app)
            strip = app.query_one("#board-cards")
            seen = [board.view.selected]
            for key in ("ctrl+pageup", "ctrl+pageup", "ctrl+pagedown", "home", "ctrl+pagedown"):
                await pilot.press(key)
                await pilot.pause()
                selected = next(c for c in app.query(RunCard) if c.has_class("-selected"))
                assert selected.record.id == board.view.selected
                assert strip.region.contains_region(selected.region), (size, key)
                seen.append(board.view.selected)
            assert seen[0] == 12 and seen[1] < 12 and seen[2] < seen[1]  # back a page, twice
            assert seen[3] > seen[2] and seen[4] == 1 and seen[5] > 1


async def test_each_card_keeps_its_own_end_state_and_only_the_live_run_offers_a_load() -> None:
    flags = ServeFlags(model=MODEL)
    up = StartupProfile(seconds_to_ready=3.0)

    def run(i: int, status: RunStatus, session: str) -> RunRecord:
        return RunRecord(
            id=i,
            label=f"#{i}",
            created_at=FIXED_TIME,
            flags=flags,
            status=status,
            startup=up,
            session=session,
        )

    runs = [
        run(1, RunStatus.REPLACED, "s1"),
        run(2, RunStatus.LOST, "s1"),
        run(3, RunStatus.READY, "s2"),  # still READY in another console: not ours to load
        run(4, RunStatus.READY, "s3"),
    ]
    session = FakeSession(runs=runs, state=ServerState.READY)
    app = create_app(session, clock=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        bodies = [str(c.query_one(".card-body").render()) for c in app.query(RunCard)]
        assert [b.splitlines()[0].split()[0] for b in bodies] == [
            "REPLACED",
            "LOST",
            "READY",
            "READY",
        ]
        assert ["b runs it" in b for b in bodies] == [False, False, False, True]
        assert "no load was run" in bodies[0]
        # once the live run is stopped, nothing offers a load
        session.state = ServerState.STOPPED
        session.update_run(runs[3].model_copy(update={"status": RunStatus.STOPPED}))
        await pilot.pause()
        bodies = [str(c.query_one(".card-body").render()) for c in app.query(RunCard)]
        assert not any("b runs it" in b for b in bodies)
        assert bodies[3].startswith("STOPPED")


async def test_v_opens_before_after_for_the_baseline_and_the_selected_run() -> None:
    session = board_session()
    app = create_app(session, clock=None)
    notes = NoteLog(app)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("home")  # #1, the baseline (the first load)
        await pilot.press("v")
        await pilot.pause()
        assert app.screen is app.main_screen
        assert "is the baseline" in notes.text()
        await pilot.press("right")  # #2
        await pilot.press("v")
        await pilot.pause()
        text = str(app.screen.query_one("#ba-table").render())
        assert "Before #1" in text and "After #2" in text
        assert "out tok/s" in text and "41.4% increase" in text  # 640 -> 905
        assert "max_num_seqs 128 → 256" in text
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.main_screen


async def test_repeats_read_as_noise_and_n_asks_the_session_to_repeat() -> None:
    first, second, _ = three_session_runs()
    # a repeat of #2: same flags and workload, 3% slower: inside nothing yet, then a group
    repeat = second.model_copy(update={"id": 4, "label": "#4"})
    assert repeat.bench is not None
    repeat = repeat.model_copy(
        update={"bench": repeat.bench.model_copy(update={"output_throughput": 880.0})}
    )
    session = board_session([first, second, repeat])
    app = create_app(session, clock=None)
    notes = NoteLog(app)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("home", "p")  # pin #1
        await pilot.press("t")
        await pilot.pause()
        board = board_of(app).board
        assert board is not None
        rows = {r.label: r for r in board.table.rows}
        assert rows["#2"].repeats == 2 and rows["#4"].repeats == 2
        # #2 and #4 are one group: against the pinned #1 they are a gain; against each
        # other, noise
        ba = board.before_after(second, repeat)
        assert all(r.comparison.verdict.value in ("noise", "n/a") for r in ba.rows)
        await pilot.press("t")
        await pilot.press("right", "n")  # #2
        await pilot.pause()
        field = app.screen.query_one(Input)
        assert field.value == "3"
        await pilot.press("enter")
        await settle(pilot)
        assert session.tools.repeats == [(2, 3)]
        assert "Repeat" in notes.text()
    # a run with no load cannot be repeated like for like
    failed_only = board_session(three_session_runs()[2:])
    app = create_app(failed_only, clock=None)
    notes = NoteLog(app)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("n")
        await pilot.pause()
        assert failed_only.tools.repeats == [] and "ran no load" in notes.text()


async def test_e_exports_the_selected_run_in_the_chosen_format() -> None:
    session = board_session()
    app = create_app(session, clock=None)
    notes = NoteLog(app)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("left", "e")
        await pilot.pause()
        await pilot.press("down", "down", "enter")  # command, yaml, compose
        await settle(pilot)
        assert session.tools.exports == [(2, "compose")]
        assert "/data/vtc/exports/runs/2/compose.out" in notes.text()


async def test_l_loads_the_selected_runs_flags_and_workload_into_the_form() -> None:
    session = board_session()
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        form = app.main_screen.form
        form.field("load-num_prompts").set_value("5")
        await pilot.press("left", "l")
        await pilot.pause()
        flags, _ = form.validate_flags()
        assert flags == three_session_runs()[1].flags
        assert form.field("load-num_prompts").value == "64"


async def test_ctrl_s_saves_the_form_as_a_preset_and_the_picker_marks_edits() -> None:
    session = board_session()
    app = create_app(session, clock=None)
    async with app.run_test(size=(120, 40)) as pilot:
        form = app.main_screen.form
        form.field("max_num_seqs").set_value("96")
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
        await pilot.press(*"my/preset")
        await pilot.press("enter")
        await pilot.pause()
        assert "letters, digits" in str(app.screen.query_one("#ask-error").render())
        app.screen.query_one(Input).value = "mine-96"
        await pilot.press("enter")
        await settle(pilot)
        (saved,) = session.tools.saved
        assert saved.name == "mine-96" and saved.flags.max_num_seqs == 96
        picker = form.query_one("#preset")
        assert form.chosen_preset == saved and picker.value is not None
        # an edit after saving: the picker says the form is no longer that preset
        form.field("max_num_seqs").set_value("97")
        await pilot.pause()
        await pilot.pause()
        assert "mine-96 (edited)" in picker.prompt  # type: ignore[attr-defined]


async def test_with_a_field_focused_the_key_bar_shows_the_keys_that_work_there() -> None:
    session = board_session()
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:

        def bar() -> list[str]:
            return [k.key_display for k in app.query_one(Footer).query("FooterKey")]  # type: ignore[attr-defined]

        # The footer recomposes its keys after a focus change: wait for it, not for a speed.
        await until(lambda: bool(bar()), "the key bar's keys")
        # a failed start is the latest run: its fix is among the first keys
        assert bar()[:2] == ["r", "f"] and "Esc" not in bar()
        app.main_screen.form.focus_field("max_model_len")
        await until(lambda: "Esc" in bar(), "the key bar of a focused field")
        # Esc first (it gives the letters back), the F-keys after, F1 (help: "N more") last
        assert bar()[0] == "Esc" and bar()[-1] == "F1", bar()
        assert {"F5", "F4", "F3", "F2"} <= set(bar())  # F6: no server to load here
        assert not [k for k in bar() if len(k) == 1 and k.isalpha()]  # letters type there
        await pilot.press("escape")
        await until(lambda: "Esc" not in bar() and bool(bar()), "the board's key bar again")
        assert board_of(app).has_focus_within and "r" in bar()


async def test_g_plots_the_served_runs_with_the_frontier_and_x_switches_the_latency() -> None:
    session = board_session()
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("g")
        await pilot.pause()
        screen = app.screen
        scatter = screen.scatter  # type: ignore[attr-defined]
        assert [p.label for p in scatter.points] == ["#1", "#2"]  # the failure has no numbers
        assert scatter.latency.key == "p99_ttft_ms"
        assert {p.label for p in scatter.frontier} == {"#1", "#2"}  # neither dominates
        notes = str(screen.query_one("#plot-notes").render())
        assert "frontier #1 → #2" in notes and "baseline #1" in notes
        await pilot.press("x")
        await pilot.pause()
        assert screen.scatter.latency.key == "p99_e2el_ms"  # type: ignore[attr-defined]
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.main_screen


async def test_the_full_view_reads_the_log_and_charts_the_telemetry() -> None:
    runs = three_session_runs()
    runs[1] = detailed_run(runs[1])
    session = board_session(runs)
    session.tools.logs[2] = LogTail(("INFO engine started", "INFO ready"), "the last 2 lines")
    app = create_app(session, clock=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("left", "enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunDetailScreen)
        assert session.tools.log_reads == [2]
        log = str(screen.query_one("#detail-log").render())
        assert "INFO ready" in log and "the last 2 lines" in log
        charts = str(screen.query_one("#detail-charts").query_one(".chart-label").render())
        assert charts.startswith("KV cache %")
        card = str(screen.query_one("#detail-card").render())
        assert "vllm serve" in card and "HF_TOKEN=(secret)" in card
        startup = str(screen.query_one("#detail-startup").render())
        assert "load weights" in startup and "ready after 12.0s" in startup
        await pilot.press("escape", "left", "enter")  # #1: no samples, no log recorded
        await settle(pilot)
        axis = app.screen.query_one("#detail-charts").query_one(".chart-axis")
        assert "no samples" in str(axis.render())
        assert "no log file recorded" in str(app.screen.query_one("#detail-log").render())


async def test_sweep_trials_are_marked_and_a_flag_filter_comes_from_the_cursor() -> None:
    runs = three_session_runs()
    runs[1] = runs[1].model_copy(update={"sweep": SweepTag(sweep_id="sw1", trial=3)})
    session = board_session(runs)
    app = create_app(session, clock=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("t")
        await pilot.pause()
        label = str(grid_of(app).get_cell_at((1, 0)))
        assert "#2" in label and "t3" in label
        await cursor_to_run(pilot, "#2")
        await cursor_to_column(pilot, "flag:max_num_seqs")
        await pilot.press("slash")
        await pilot.pause()
        field = app.screen.query_one(Input)
        assert field.value == "max_num_seqs=256"
        await pilot.press("enter")
        await pilot.pause()
        assert row_labels(app) == ["#2"]


async def test_help_lists_every_board_key_and_the_moving_keys() -> None:
    app = create_app(board_session(), clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        keys = [line[:10].strip() for line in help_lines(app)]  # the key column
        for key in (
            "t",
            "Enter",
            "p",
            "v",
            "g",
            "n",
            "e",
            "l",
            "/",
            "[",
            "]",
            "ctrl+s",
            "←/→",
            "↑/↓",
            "PgUp/PgDn",
            "Home/End",
            "^PgUp/PgDn",
        ):
            assert key in keys, key
        box = app.screen.query_one("#help-box")
        await pilot.press("end")  # help scrolls by keyboard too
        await pilot.pause()
        assert box.max_scroll_y > 0 and box.scroll_y == box.max_scroll_y
