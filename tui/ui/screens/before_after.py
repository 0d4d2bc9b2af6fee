"""Seed 003's Before / After table for two runs: each metric, both values, the change.

The words are the domain's (:mod:`tui.domain.board.before_after`): "61.5% faster", "88.9%
increase", and "(noise)" or "(other load)" where the change is not a gain. The verdict on the
change leads (:mod:`tui.domain.board.judgement`); the rows come worse first.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.domain.board.baseline import run_label
from tui.domain.board.before_after import BeforeAfter
from tui.domain.flags.serve import format_value
from tui.ui.board_cells import DIFFERS, VERDICT_STYLES, judgement_lines
from tui.ui.format import plain

METRIC_WIDTH = 11
VALUE_WIDTH = 11


def before_after_content(ba: BeforeAfter) -> Content:
    """The table, then what changed between the two runs and whether they compare."""
    before, after = run_label(ba.before), run_label(ba.after)
    head = (
        f"{'Metric':<{METRIC_WIDTH}}{'Before ' + before:>{VALUE_WIDTH}}"
        f"{'After ' + after:>{VALUE_WIDTH}}  Change"
    )
    lines = [*judgement_lines(ba.judgement), Content("")] if ba.judgement is not None else []
    lines.append(Content.styled(head, "bold"))
    for row in ba.rows:
        c = row.comparison
        values = (
            f"{row.metric.label:<{METRIC_WIDTH}}{row.metric.format(c.reference):>{VALUE_WIDTH}}"
            f"{row.metric.format(c.value):>{VALUE_WIDTH}}  "
        )
        lines.append(Content.assemble(values, (row.change, VERDICT_STYLES.get(c.verdict, ""))))
    lines.append(Content(""))
    if ba.flag_changes:
        lines.append(Content.styled("Flags changed", "bold"))
        lines += [
            Content.styled(f"  {c.name} {format_value(c.old)} → {format_value(c.new)}", DIFFERS)
            for c in ba.flag_changes
        ]
    else:
        lines.append(
            Content.styled("Flags changed: none (a repeat: any difference is noise)", "$text-muted")
        )
    if not ba.like_for_like.ok:
        lines.append(Content.styled("Not like for like (changes are not gains):", "$warning"))
        lines += [Content.styled(f"  {reason}", "$warning") for reason in ba.like_for_like.reasons]
    return Content("\n").join(lines)


class BeforeAfterScreen(ModalScreen[None]):
    """The Before / After table in a box; Esc, v or q closes it."""

    DEFAULT_CSS = """
    BeforeAfterScreen {
        align: center middle;
        background: $background 60%;
    }
    #ba-box {
        width: 64;
        max-width: 100%;
        height: auto;
        max-height: 100%;
        border: round $accent;
        background: $surface;
        padding: 0 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,v,q", "close", "Close", key_display="Esc"),
    ]

    def __init__(self, ba: BeforeAfter) -> None:
        super().__init__()
        self._ba = ba

    def compose(self) -> ComposeResult:
        """The table in a scrolling box."""
        with VerticalScroll(id="ba-box"):
            yield Static(before_after_content(self._ba), id="ba-table")

    def on_mount(self) -> None:
        """Title the box, focus it (it scrolls with the keyboard on a short terminal)."""
        box = self.query_one("#ba-box")
        box.border_title = f"Before / After · {plain(self._ba.title)}"
        box.border_subtitle = "Esc closes"
        box.focus()

    def action_close(self) -> None:
        """Close the table."""
        self.dismiss(None)
