"""The keys an operator presses most stay cheap by construction (issue 22).

A structural check, not a timing test: while the board is toggled, its selection moved,
help and the run detail opened and closed, the console makes no blocking call on its event
loop (file, socket, process, sleep: Python's audit events), rebuilds no widget of the work
area, restyles none of the form's widgets, rebuilds no board for a toggle, clears no table
and rewrites no cell on a selection move (the mark is drawn over the line), rebuilds no key
bar when the keys it shows stay the same, and composes help only once. What arrives on the
same frame as a key costs no whole-screen layout either (a GPU sample each second, a load's
progress tick: issue 29's tail), and the heap built at start is out of the garbage
collector's full passes (``tui.ui.gc_pause``).
``benchmarks/console_latency.py`` measures the time these keys take in a real terminal.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import pytest
from textual.css.stylesheet import Stylesheet
from textual.dom import DOMNode
from textual.pilot import Pilot
from textual.widget import Widget
from ui_fakes import (
    BOARD_LOAD,
    board_session,
    gpu_sample,
    host_sample,
    load_progress,
    many_runs,
    press_each,
    server_metrics,
)

from tui.domain.board.view import Board, build_board
from tui.ui.app import VtcApp, create_app
from tui.ui.screens.help import HelpScreen
from tui.ui.screens.run_detail import RunDetailScreen
from tui.ui.widgets import results_board
from tui.ui.widgets.board_grid import BoardGrid
from tui.ui.widgets.flag_form import FlagForm
from tui.ui.widgets.load_panel import LoadPanel
from tui.ui.widgets.results_board import ResultsBoard
from tui.ui.widgets.run_card import RunCard

BLOCKING_EVENTS = frozenset(
    {
        "open",
        "time.sleep",
        "subprocess.Popen",
        "os.system",
        "os.posix_spawn",
        "os.fork",
        "socket.connect",
        "socket.getaddrinfo",
        "sqlite3.connect",
        "shutil.copyfile",
    }
)
HOT_KEYS = ("left", "right", "t", "up", "down", "t", "question_mark", "escape", "enter", "escape")


class LoopCalls:
    """Blocking calls (audit events) made on the test's thread while armed."""

    def __init__(self) -> None:
        self.armed = False
        self.thread = threading.get_ident()
        self.seen: list[str] = []

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if self.armed and event in BLOCKING_EVENTS and threading.get_ident() == self.thread:
            self.seen.append(f"{event} {args!r:.100}")


_CALLS = LoopCalls()
sys.addaudithook(_CALLS)  # an audit hook stays for the process: it records only while armed


def console() -> VtcApp:
    return create_app(board_session(many_runs(30)), clock=None)


def widgets_under(node: DOMNode) -> set[int]:
    return {id(w) for w in node.walk_children(with_self=True)}


async def test_hot_keys_make_no_blocking_call_on_the_event_loop() -> None:
    app = console()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await press_each(pilot, *HOT_KEYS)  # once first: lazy imports open their files once
        await app.workers.wait_for_complete()
        _CALLS.thread, _CALLS.seen = threading.get_ident(), []
        _CALLS.armed = True
        try:
            await press_each(pilot, *HOT_KEYS)
        finally:
            _CALLS.armed = False
        assert isinstance(app.screen, type(app.main_screen))
    assert _CALLS.seen == []


async def test_toggling_the_board_rebuilds_nothing_and_leaves_the_form_styles_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = console()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        work = app.screen.query_one("#work")
        form = app.screen.query_one(FlagForm)
        cards = list(app.screen.query(RunCard))
        before = widgets_under(work)
        restyled: list[DOMNode] = []
        update_nodes = app.stylesheet.update_nodes

        def counting(self: Stylesheet, nodes: Iterable[DOMNode], animate: bool = False) -> None:
            nodes = list(nodes)
            restyled.extend(nodes)
            update_nodes(nodes, animate=animate)

        monkeypatch.setattr(app.stylesheet, "update_nodes", counting.__get__(app.stylesheet))
        built: list[object] = []

        def counting_build(*args: Any, **kwargs: Any) -> Board:
            built.append(args)
            return build_board(*args, **kwargs)

        monkeypatch.setattr(results_board, "build_board", counting_build)
        await press_each(pilot, "t")
        assert app.screen.query_one(ResultsBoard).table_mode
        assert not form.display  # 80 columns: the table takes the form's width
        await press_each(pilot, "up", "down", "t")
        assert form.display
        assert widgets_under(work) == before  # nothing mounted, removed or recomposed
        assert list(app.screen.query(RunCard)) == cards  # the same cards, updated in place
        in_form = widgets_under(form)
        assert not [n for n in restyled if id(n) in in_form]
        assert app.screen not in restyled  # no class on the screen
        assert not [n for n in restyled if isinstance(n, RunCard)]  # the board's focus: held
        assert built == []  # the same runs and view: the board is drawn, not rebuilt


async def test_selection_moves_in_the_table_do_not_rebuild_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = console()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await press_each(pilot, "t")
        grid = app.screen.query_one(BoardGrid)
        cleared: list[bool] = []
        clear = grid.clear

        def counting_clear(columns: bool = False) -> BoardGrid:
            cleared.append(columns)
            return clear(columns)

        monkeypatch.setattr(grid, "clear", counting_clear)
        updated: list[object] = []
        monkeypatch.setattr(grid, "update_cell", lambda *a, **k: updated.append(a))
        rows = grid.row_count
        await press_each(pilot, "up", "up", "down")
        assert grid.cursor_row == rows - 2  # moved: the selection is on the run above the last
        assert cleared == []
        assert grid.row_count == rows
        # no cell rewritten (a DataTable re-renders every cell after one): the mark is drawn
        assert updated == []
        assert grid.marked_row == rows - 2
        assert [_line(grid, row)[1] for row in (rows - 3, rows - 2, rows - 1)] == [" ", "▸", " "]


def _line(grid: BoardGrid, row: int) -> str:
    """The text of ``row``'s line as the table draws it."""
    return grid.render_line(grid.header_height + row - grid.scroll_offset.y).text


async def test_focus_moves_that_keep_the_keys_do_not_rebuild_the_key_bar() -> None:
    app = console()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        keys = [id(k) for k in app.main_screen.query("FooterKey")]
        assert keys
        await press_each(pilot, "t", "question_mark", "escape", "t", "enter", "escape")
        assert [id(k) for k in app.main_screen.query("FooterKey")] == keys


async def test_help_is_composed_once_and_stays_small() -> None:
    app = console()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await press_each(pilot, "question_mark")
        first = app.screen
        assert isinstance(first, HelpScreen)
        widgets: list[Widget] = list(first.walk_children())
        assert len(widgets) <= 4  # one scroller, one text: not a widget per key
        await press_each(pilot, "escape", "question_mark")
        assert app.screen is first
        assert [id(w) for w in first.walk_children()] == [id(w) for w in widgets]
        await press_each(pilot, "escape")
        assert app.screen is app.main_screen


async def test_the_run_detail_opens_without_rebuilding_the_board() -> None:
    app = console()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        before = widgets_under(app.screen.query_one("#board"))
        await press_each(pilot, "enter")
        assert isinstance(app.screen, RunDetailScreen)
        await press_each(pilot, "escape")
        assert widgets_under(app.screen.query_one("#board")) == before


def _escape_delay_s(env: dict[str, str]) -> float:
    import os
    import subprocess

    code = "import tui.ui.app, textual.constants as c; print(c.ESCAPE_DELAY)"
    clean = {k: v for k, v in os.environ.items() if k != "ESCDELAY"}
    out = subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return float(out.stdout)


def test_a_lone_escape_is_not_held_for_textual_default_100_ms() -> None:
    """Every Esc waited Textual's ESCDELAY (100 ms) before it took effect; the console
    waits 25 ms unless the operator set ESCDELAY (issue 22: Esc keys measured ~145 ms)."""
    assert _escape_delay_s({}) == 0.025
    assert _escape_delay_s({"ESCDELAY": "80"}) == 0.08


async def test_telemetry_and_load_ticks_lay_out_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each second's GPU sample asked for a layout of the whole screen (its reactive said
    ``layout=True``), each load tick two more (``Static.update``'s default): on the frame of a
    key pressed then, the key waited for them."""
    app = console()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.main_screen
        screen.query_one(LoadPanel).start(BOARD_LOAD)
        screen.apply(gpu_sample())  # the first of each: the panels take their shape
        screen.apply(host_sample())
        screen.apply(server_metrics())
        screen.apply(load_progress(1, 300.0))
        await pilot.pause()
        layouts: list[str] = []
        refresh = Widget.refresh

        def counting(self: Widget, *regions: Any, **kwargs: Any) -> Widget:
            if kwargs.get("layout"):
                layouts.append(f"{type(self).__name__}#{self.id}")
            return refresh(self, *regions, **kwargs)

        monkeypatch.setattr(Widget, "refresh", counting)
        for tick in range(2, 8):
            sample = gpu_sample()
            screen.apply(replace(sample, t=sample.t + tick))
            screen.apply(host_sample())
            screen.apply(server_metrics())
            screen.apply(load_progress(tick, 300.0 + 10 * tick))
            await pilot.pause()
        assert layouts == []


async def test_the_heap_built_at_start_is_out_of_the_collectors_full_passes() -> None:
    app = console()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.frozen > 10_000  # the widget tree, styles, stylesheet: walked never again
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0  # handed back when the console ends


# Each key that opens a screen from the card view, with the screen it opens.
SCREEN_KEYS: tuple[tuple[str, str], ...] = (
    ("question_mark", "HelpScreen"),
    ("enter", "RunDetailScreen"),
    ("h", "HistoryScreen"),
    ("v", "BeforeAfterScreen"),
    ("g", "PlotScreen"),
    ("w", "SweepScreen"),
    ("slash", "AskScreen"),
    ("ctrl+p", "CommandPalette"),  # Textual's palette, opened as a passing screen too
)


async def _esc_and_count(
    pilot: Pilot[Any], app: VtcApp, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[str], list[DOMNode]]:
    """Press Esc; the layouts asked of the main screen meanwhile, and its nodes restyled."""
    main = app.main_screen
    layouts: list[str] = []
    restyled: list[DOMNode] = []
    refresh = Widget.refresh
    app_refresh = type(app).refresh
    update_nodes = app.stylesheet.update_nodes

    def counting(self: Widget, *regions: Any, **kwargs: Any) -> Widget:
        if kwargs.get("layout") and self.screen is main:
            layouts.append(f"{type(self).__name__}#{self.id}")
        return refresh(self, *regions, **kwargs)

    def counting_app(self: VtcApp, **kwargs: Any) -> VtcApp:
        if kwargs.get("layout") and self.screen is main:
            layouts.append("app")
        return app_refresh(self, **kwargs)

    def counting_styles(self: Stylesheet, nodes: Iterable[DOMNode], animate: bool = False) -> None:
        nodes = list(nodes)
        restyled.extend(n for n in nodes if n is main or main in n.ancestors)
        update_nodes(nodes, animate=animate)

    with monkeypatch.context() as patch:
        patch.setattr(Widget, "refresh", counting)
        patch.setattr(type(app), "refresh", counting_app)
        patch.setattr(app.stylesheet, "update_nodes", counting_styles.__get__(app.stylesheet))
        await press_each(pilot, "escape")
        await pilot.pause()
    return layouts, restyled


@pytest.mark.parametrize(("key", "opened"), SCREEN_KEYS)
async def test_esc_back_to_the_main_screen_lays_out_and_restyles_nothing_there(
    monkeypatch: pytest.MonkeyPatch, key: str, opened: str
) -> None:
    """Issue 39 item 6: Esc to a screen's parent sat ~90 ms above the key that opened it.
    A popped screen was removed, and its removal laid out the whole main screen (twice for
    a run's detail); it is now kept until the next screen opens (tui.ui.screen_keeper).
    Esc from every screen: no layout and no restyle of the main screen, nothing of it
    mounted or removed; the screen closed is removed only when the next one opens."""
    from tui.ui.screen_keeper import keeper_of

    app = console()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        main = app.main_screen
        await press_each(pilot, "p")  # a baseline, so v has a Before/After to show
        await press_each(pilot, "left")
        before = widgets_under(main)
        for _ in range(2):  # twice: the second time, the first one's screen goes
            await press_each(pilot, key)
            await app.workers.wait_for_complete()
            assert type(app.screen).__name__ == opened
            layouts, restyled = await _esc_and_count(pilot, app, monkeypatch)
            assert app.screen is main
            assert layouts == [], layouts
            assert restyled == [], [type(n).__name__ for n in restyled][:10]
            assert widgets_under(main) == before
        keeper = keeper_of(app)
        if key not in ("question_mark", "w"):  # help and the sweep: installed, composed once
            assert keeper is not None and len(keeper.kept) == 1  # the last one, until the next
