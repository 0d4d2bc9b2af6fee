"""A small modal that offers a few choices (an export format)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import OptionList
from textual.widgets.option_list import Option


@dataclass(frozen=True)
class Choice:
    """One choice: what it returns and how it reads."""

    value: str
    text: str


class ChoiceScreen(ModalScreen[str | None]):
    """Enter picks the highlighted choice, Esc picks nothing."""

    DEFAULT_CSS = """
    ChoiceScreen {
        align: center middle;
        background: $background 60%;
    }
    #choice-list {
        width: 76;
        max-width: 95%;
        height: auto;
        max-height: 80%;
        border: round $accent;
        background: $surface;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, choices: Sequence[Choice]) -> None:
        super().__init__()
        self._title = title
        self._choices = tuple(choices)

    def compose(self) -> ComposeResult:
        """The choices in a list."""
        yield OptionList(*(Option(c.text, id=c.value) for c in self._choices), id="choice-list")

    def on_mount(self) -> None:
        """Title the list and focus it."""
        options = self.query_one(OptionList)
        options.border_title = self._title
        options.border_subtitle = "Enter: choose · Esc: cancel"
        options.highlighted = 0
        options.focus()

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        """Close without a choice."""
        self.dismiss(None)
