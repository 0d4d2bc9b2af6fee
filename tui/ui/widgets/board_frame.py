"""How the results board sits on the screen: its focus border, the form beside its table.

Why no CSS class or pseudo-class for these: a class set on the board (or the screen) and a
``:focus-within`` rule make Textual recompute the styles of every widget under it (the cards;
for the screen, the form's ~180 widgets too) on each toggle, each focus change and each
return from a modal: 100-300 ms of a keypress at 80x24 (issue 22). ``display`` and an inline
border touch only the widgets themselves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events
from textual.color import Color
from textual.widget import Widget

# A plain mixin at run time: Textual takes a widget's default CSS and type names from its
# first widget base, which must stay the board's container (Vertical).
if TYPE_CHECKING:
    _Base = Widget
else:
    _Base = object

WIDE = 150
"""Columns from which the form stays beside the table: below it the table takes the width
(at 120x40 beside the form it showed two metric columns; alone, five: issue 39)."""


class BoardFrame(_Base):
    """The board's top border in the accent colour while the focus is in it; below
    WIDE columns the form hidden while the table shows (the table takes its width)."""

    _table_mode: bool = False  # the board's: set by its toggle
    _focus_marked: bool | None = None  # what the border shows now (None: not drawn yet)

    @property
    def table_mode(self) -> bool:
        """Whether the table (not the cards) is shown."""
        return self._table_mode

    def fit_form(self) -> None:
        """Show the form unless the table needs its width."""
        form = self.screen.query_one("#form")
        wanted = not (self.table_mode and self.screen.size.width < WIDE)
        if form.display != wanted:  # unchanged: no relayout
            form.display = wanted

    def on_resize(self, _: events.Resize) -> None:
        """The terminal changed size: is there room for the form beside the table?"""
        self.fit_form()

    def _mark_focus(self) -> None:
        focused = self.has_focus_within
        if focused == self._focus_marked:
            return  # unchanged: no refresh
        self._focus_marked = focused
        if focused:
            self.styles.border_top = ("solid", Color.parse(self.app.theme_variables["accent"]))
        else:
            self.styles.border_top = None  # back to the stylesheet's (.panel)

    def on_descendant_focus(self, _: events.DescendantFocus) -> None:
        """Its focus holder or its table took the focus: the board is the one acting."""
        self._mark_focus()

    def on_descendant_blur(self, _: events.DescendantBlur) -> None:
        """Its focus holder or its table lost the focus."""
        self._mark_focus()
