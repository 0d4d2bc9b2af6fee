"""The board's card view: one card per run side by side, one selected, all by keyboard.

The board (which holds the focus in card view) binds the keys to these actions: Left/Right
select the previous/next card (it scrolls into view), Up/Down and PgUp/PgDn scroll the
selected card's text, Home/End select the first/last card, ctrl+PgUp/PgDn a screenful of
cards back/on. The selection is announced with :class:`CardStrip.Selected`.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual import events
from textual.containers import HorizontalScroll
from textual.message import Message

from tui.domain.results import RunRecord
from tui.ui.widgets.run_card import CardContext, RunCard

CARD_STRIDE = 34  # a card's width and its right margin (app.tcss: .run-card)


class CardStrip(HorizontalScroll, can_focus=False):
    """The cards, oldest left; the selected one highlighted."""

    class Selected(Message):
        """The operator moved the selection to the run ``run_id``."""

        def __init__(self, run_id: int | None) -> None:
            super().__init__()
            self.run_id = run_id

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._selected: int | None = None

    @property
    def cards(self) -> list[RunCard]:
        """The cards, left to right."""
        return list(self.query(RunCard))

    @property
    def selected_id(self) -> int | None:
        """The run id of the selected card (the strip's own, ahead of any message)."""
        return self._selected

    @property
    def selected(self) -> RunCard | None:
        """The selected card, if any."""
        return next((c for c in self.cards if c.record.id == self._selected), None)

    def show(self, cards: Sequence[tuple[RunRecord, CardContext]], selected: int | None) -> None:
        """Draw these cards (update in place, add, drop) with ``selected`` highlighted."""
        moved = selected != self._selected
        self._selected = selected
        mounted = self.cards
        fresh: list[RunCard] = []
        in_view = self._in_view(len(cards))
        for slot, (record, context) in enumerate(cards):
            if slot < len(mounted):  # a card out of view is drawn when it comes into view
                mounted[slot].show(record, context, draw=slot in in_view)
            else:
                fresh.append(RunCard(record, context))
        for extra in mounted[len(cards) :]:
            extra.remove()
        for card in [*mounted[: len(cards)], *fresh]:
            card.set_class(card.record.id == selected, "-selected")
        if fresh:
            self.mount_all(fresh)
        self._after_layout(moved or bool(fresh))

    def _mark_selected(self, reveal: bool) -> None:
        for card in self.cards:
            card.set_class(card.record.id == self._selected, "-selected")
        if reveal:
            self._reveal()
        self._draw_in_view()

    def _in_view(self, count: int) -> range:
        """The slots of the cards in view now (every slot before the strip has a width).

        Only these are drawn when the board changes (a pin redraws every card's deltas:
        30 cards' text and styles for the two or three an 80-column board shows); the
        others when they scroll into view (:meth:`watch_scroll_x`)."""
        width = self.scrollable_content_region.width
        if width <= 0:
            return range(count)
        first = int(self.scroll_x) // CARD_STRIDE
        last = (int(self.scroll_x) + width - 1) // CARD_STRIDE
        return range(max(0, first), min(count, last + 1))

    def _draw_in_view(self) -> None:
        cards = self.cards
        for slot in self._in_view(len(cards)):
            cards[slot].draw()

    def watch_scroll_x(self, old_value: float, new_value: float) -> None:
        """Scrolled (a selection moved, the mouse): draw the cards that came into view."""
        super().watch_scroll_x(old_value, new_value)
        self._draw_in_view()

    def _reveal(self) -> None:
        """Scroll so the selected card shows whole (by its place in the row: a card mounted
        a moment ago has no region yet)."""
        ids = [c.record.id for c in self.cards]
        if self._selected not in ids:
            return
        left = ids.index(self._selected) * CARD_STRIDE
        right = left + CARD_STRIDE - 1
        width = self.scrollable_content_region.width
        if width <= 0:
            return  # not laid out yet: on_resize reveals it
        if left < self.scroll_x:
            target = left
        elif right > self.scroll_x + width:
            target = right - width
        else:
            return
        self.scroll_to(x=target, animate=False, immediate=True)

    def on_resize(self) -> None:
        """Keep the selected card in view when the board changes size."""
        self._after_layout(True)

    def _after_layout(self, reveal: bool) -> None:
        # After the next refresh the cards have their place; asking for a refresh makes
        # sure there is one (an idle screen would otherwise run the callback only at the
        # next key press). A repaint, not a layout: cards mounted or removed, or a card's
        # text of a new height, ask for their own; a layout here laid out the whole screen
        # on every pin and selection (issue 39).
        self.call_after_refresh(self._mark_selected, reveal)
        self.refresh()

    def _select_index(self, index: int) -> None:
        cards = self.cards
        if not cards:
            return
        index = max(0, min(len(cards) - 1, index))
        run_id = cards[index].record.id
        if run_id != self._selected:
            self._selected = run_id
            self._mark_selected(True)
            self.post_message(self.Selected(run_id))

    def _index(self) -> int:
        ids = [c.record.id for c in self.cards]
        return ids.index(self._selected) if self._selected in ids else len(ids) - 1

    def action_step(self, delta: int) -> None:
        """Select the card ``delta`` places away (clamped to the ends)."""
        self._select_index(self._index() + delta)

    def action_page_cards(self, direction: int) -> None:
        """Select the card a screenful away."""
        per_page = max(1, self.size.width // CARD_STRIDE)
        self._select_index(self._index() + direction * per_page)

    def action_scroll_card(self, lines: int) -> None:
        """Scroll the selected card's text."""
        card = self.selected
        if card is not None:
            card.scroll_relative(y=lines, animate=False)

    def action_page_card(self, direction: int) -> None:
        """Page the selected card's text."""
        card = self.selected
        if card is not None:
            card.scroll_relative(y=direction * max(1, card.size.height - 1), animate=False)

    def on_click(self, event: events.Click) -> None:
        """A click on a card selects it."""
        widget = event.widget
        for node in widget.ancestors_with_self if widget is not None else ():
            if isinstance(node, RunCard):
                ids = [c.record.id for c in self.cards]
                self._select_index(ids.index(node.record.id))
                return
