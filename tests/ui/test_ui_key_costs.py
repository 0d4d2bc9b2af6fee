"""What the slower keys rebuild, counted (issue 39: every key's p95 <= 100 ms idle).

Structural, never timed: a pin (``p``) draws the cards in view, not all thirty (the others
when they scroll into view); a sort (``[``/``]``) reorders the built board, judging no run
again; ``w`` shows the sweep screen it built before while the form's flags stay, and its
footer is not composed again when its keys stay. ``benchmarks/console_latency.py``
measures the time these keys take in a real terminal.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from rich.style import Style
from textual.renderables.styled import Styled
from textual.strip import Strip
from textual.widget import Widget
from ui_fakes import board_session, many_runs, press_each

from tui.domain.board.view import Board, build_board
from tui.ui.app import VtcApp, create_app
from tui.ui.screens.sweep import SweepScreen
from tui.ui.widgets import results_board, run_card
from tui.ui.widgets.board_grid import BoardGrid
from tui.ui.widgets.card_strip import CardStrip
from tui.ui.widgets.flag_form import FlagForm
from tui.ui.widgets.results_board import ResultsBoard
from tui.ui.widgets.run_card import card_heading


def console() -> VtcApp:
    return create_app(board_session(many_runs(30)), clock=None)


def count_card_bodies(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    drawn: list[int | None] = []
    body = run_card.card_body

    def counting(record: Any, context: Any) -> Any:
        drawn.append(record.id)
        return body(record, context)

    monkeypatch.setattr(run_card, "card_body", counting)
    return drawn


async def test_a_pin_draws_the_cards_in_view_and_the_rest_as_they_come_into_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = console()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        strip = app.main_screen.query_one(CardStrip)
        cards = strip.cards
        in_view = [c for c in cards if strip.region.overlaps(c.region)]  # 80 columns: 2 or 3
        assert 0 < len(in_view) <= 3 < len(cards)
        drawn = count_card_bodies(monkeypatch)
        await press_each(pilot, "p")
        # the cards in view (and one whose margin shows), not all thirty
        assert {c.record.id for c in in_view} <= set(drawn) and len(drawn) <= 3
        assert [c for c in cards if not c.stale] == [c for c in cards if c.record.id in drawn]
        pinned = strip.selected_id
        drawn.clear()
        await press_each(pilot, "home")  # the first cards come into view: drawn then, as pinned
        first = strip.cards[0]
        assert first.record.id in drawn and not first.stale
        assert card_heading(first.context).endswith(f"vs #{pinned}")
        assert len(drawn) <= 3
        assert strip.cards == cards  # the same cards, updated in place


def count_builds(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    built: list[object] = []

    def counting(*args: Any, **kwargs: Any) -> Board:
        built.append(args)
        return build_board(*args, **kwargs)

    monkeypatch.setattr(results_board, "build_board", counting)
    return built


async def test_a_sort_reorders_the_built_board_and_judges_no_run_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = console()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await press_each(pilot, "t", "right")
        board = app.main_screen.query_one(ResultsBoard)
        built = count_builds(monkeypatch)
        for key in ("right_square_bracket", "left_square_bracket", "right_square_bracket"):
            await press_each(pilot, key)
            shown = board.board
            assert shown is not None and shown.view.sort is not None
            fresh = build_board(shown.runs, shown.view)  # what a rebuild would show
            assert [r.run.id for r in shown.table.rows] == [r.run.id for r in fresh.table.rows]
            assert shown.table.rows == fresh.table.rows
            assert shown.scatter == fresh.scatter
        assert built == []


async def test_w_shows_the_sweep_screen_built_before_while_the_form_stays() -> None:
    app = console()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await press_each(pilot, "w")
        first = app.screen
        assert isinstance(first, SweepScreen)
        widgets = [id(w) for w in first.walk_children()]
        keys = [id(k) for k in first.query("FooterKey")]
        assert keys
        await press_each(pilot, "escape", "w")
        assert app.screen is first  # shown again, composed once
        assert [id(w) for w in first.walk_children()] == widgets  # its footer's keys too
        assert [id(k) for k in first.query("FooterKey")] == keys
        await press_each(pilot, "escape")
        assert app.screen is app.main_screen


async def test_the_sweep_screen_is_built_anew_from_changed_flags() -> None:
    app = console()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await press_each(pilot, "w")
        first = app.screen
        await press_each(pilot, "escape")
        form = app.main_screen.query_one(FlagForm)
        flags, _ = form.validate_flags()
        assert flags is not None
        form.load_flags(flags.model_copy(update={"max_num_seqs": 7}))
        await pilot.pause()
        await press_each(pilot, "w")
        assert isinstance(app.screen, SweepScreen) and app.screen is not first
        assert not first.is_attached  # the old one is gone
        await press_each(pilot, "escape")


Draw = tuple[int, int, Style, Style | None]


def count_cell_draws(app: VtcApp, monkeypatch: pytest.MonkeyPatch) -> list[Draw]:
    """Each table cell Rich renders: its row, column and styles (a DataTable cell is drawn
    as a ``Styled`` whose style carries its row and column; the fixed column's cells are
    drawn in two styles, the fixed one and the scrolled one)."""
    drawn: list[Draw] = []
    render_lines = app.console.render_lines

    def counting(renderable: Any, *args: Any, **kwargs: Any) -> Any:
        pre = getattr(renderable, "pre_style", None)
        if isinstance(renderable, Styled) and isinstance(pre, Style):
            meta = pre.meta
            if "row" in meta and "column" in meta:
                drawn.append((meta["row"], meta["column"], pre, renderable.post_style))
        return render_lines(renderable, *args, **kwargs)

    monkeypatch.setattr(app.console, "render_lines", counting)
    return drawn


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_table_key_draws_each_visible_cell_at_most_once(
    monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    """``t``, a column step and a sort each changed the table's size and drew every visible
    cell twice: the frame drew them, then the DataTable's resize handler marked them all
    stale (issue 39: the slowest keys at 120x40). A key draws a cell once at most."""
    app = console()
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await press_each(pilot, "t", "right", "left", "t")  # the table drawn once before
        drawn = count_cell_draws(app, monkeypatch)
        grid = app.main_screen.query_one(BoardGrid)
        for key in ("t", "right", "right", "left", "right_square_bracket", "up"):
            drawn.clear()
            await press_each(pilot, key)
            await pilot.pause()
            if key in ("t", "right_square_bracket"):  # the focus's style, a new order: drawn
                assert drawn, key
            repeated = [cell for cell, n in Counter(drawn).items() if n > 1]
            assert repeated == [], (key, grid.size, [cell[:2] for cell in repeated[:5]])


def count_layouts(monkeypatch: pytest.MonkeyPatch) -> list[Widget]:
    """The widgets that ask for a layout (which Textual does for the whole screen)."""
    asked: list[Widget] = []
    refresh = Widget.refresh

    def counting(self: Widget, *regions: Any, **kwargs: Any) -> Widget:
        if kwargs.get("layout"):
            asked.append(self)
        return refresh(self, *regions, **kwargs)

    monkeypatch.setattr(Widget, "refresh", counting)
    return asked


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_pin_lays_out_only_for_a_card_whose_text_changes_height(
    monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    """A pin redraws the cards in view; each asked for a layout of the whole screen, and the
    strip asked once more, though most cards keep their height (issue 39: ``p`` among the
    slowest keys). Only a card whose text changes height asks for one now."""
    app = console()
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        strip = app.main_screen.query_one(CardStrip)
        asked = count_layouts(monkeypatch)
        for key in ("p", "p", "left", "p", "right", "p", "home", "end"):
            heights = {c.record.id: c.query_one(".card-body").size.height for c in strip.cards}
            scrolled = strip.scroll_x
            asked.clear()
            await press_each(pilot, key)
            changed = {
                c.record.id
                for c in strip.cards
                if c.query_one(".card-body").size.height != heights.get(c.record.id)
            }
            bodies = {w.parent.record.id for w in asked if w.has_class("card-body")}  # type: ignore[union-attr]
            assert bodies <= changed, (key, bodies, changed)
            assert strip not in asked, key  # it asked on every board drawn
            # (a layout, a scroll, resize scrollbars and cards, which ask for more)
            if not changed and strip.scroll_x == scrolled:
                shown = [f"{type(w).__name__}#{w.id}" for w in asked if w.screen is app.main_screen]
                assert shown == [], (key, shown)


async def test_the_table_comes_back_at_the_size_it_had(monkeypatch: pytest.MonkeyPatch) -> None:
    """Back to the table, the note under it (the columns it leaves out) showed a frame later,
    so the table was laid out and drawn at one height, then at another (issue 39: ``t``).
    It comes back at one size, with its note."""
    app = console()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await press_each(pilot, "t", "t")
        grid = app.main_screen.query_one(BoardGrid)
        note = app.main_screen.query_one("#board-columns")
        sizes: set[tuple[int, int]] = set()
        render_line = grid.render_line

        def recording(y: int) -> Strip:
            sizes.add((grid.size.width, grid.size.height))
            return render_line(y)

        monkeypatch.setattr(grid, "render_line", recording)
        await press_each(pilot, "t")
        await pilot.pause()
        assert note.display and str(note.render())  # 120 columns: some are left out
        assert len(sizes) == 1, sizes
