"""The results board: one card per run, oldest left, scrolled so the newest shows."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import HorizontalScroll
from textual.widgets import Static

from tui.domain.results import RunRecord
from tui.ui.compare import bench_reference, latest_failed
from tui.ui.widgets.run_card import CardContext, RunCard

MAX_CARDS = 40  # cards mounted at most: the first run plus the latest ones
EMPTY_TEXT = "No runs yet. Edit the flags, then r starts the server with them."


class ResultsBoard(HorizontalScroll):
    """Shows a list of runs as side-by-side cards compared with the first one."""

    def compose(self) -> ComposeResult:
        """Just the empty-board hint until the first run."""
        yield Static(EMPTY_TEXT, id="board-empty")

    def show(self, runs: list[RunRecord]) -> None:
        """Draw ``runs`` (the session's board, oldest first): update, add or drop cards.

        A long history keeps the first card (the reference) and the latest ones; cards keep
        their run's number on the board either way.
        """
        cards = list(self.query(RunCard))
        self.query_one("#board-empty", Static).display = not runs
        reference = bench_reference(runs)
        failed = latest_failed(runs)
        shown = [0, *range(max(1, len(runs) - MAX_CARDS + 1), len(runs))] if runs else []
        new_cards: list[RunCard] = []
        for slot, index in enumerate(shown):
            record = runs[index]
            context = CardContext(
                number=index + 1,
                baseline=runs[0] if index else None,
                reference=(reference[0] + 1, reference[1]) if reference else None,
                fix_hint=failed is not None and failed[0] == index,
            )
            if slot < len(cards):
                cards[slot].show(record, context)
            else:
                new_cards.append(RunCard(record, context))
        for extra in cards[len(shown) :]:
            extra.remove()
        if new_cards:
            self.mount_all(new_cards)
            self.call_after_refresh(self._show_newest)

    def _show_newest(self) -> None:
        self.scroll_to(x=self.max_scroll_x, animate=False, immediate=True)
