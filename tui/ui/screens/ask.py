"""A small modal that asks for one line of text (a preset's name, a count, a filter)."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

Check = Callable[[str], str | None]
"""Why a text is not acceptable (one line), or ``None`` when it is."""


class AskScreen(ModalScreen[str | None]):
    """Asks ``question``; Enter returns the text once ``check`` accepts it, Esc ``None``."""

    DEFAULT_CSS = """
    AskScreen {
        align: center middle;
        background: $background 60%;
    }
    #ask-box {
        width: 70;
        max-width: 95%;
        height: auto;
        border: round $accent;
        background: $surface;
        padding: 0 1;
    }
    #ask-input {
        background: $surface-lighten-1;
    }
    #ask-hint {
        color: $text-muted;
    }
    #ask-error {
        color: $error;
        display: none;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(
        self, question: str, value: str = "", *, hint: str = "", check: Check | None = None
    ) -> None:
        super().__init__()
        self._question = question
        self._value = value
        self._hint = hint
        self._check = check

    def compose(self) -> ComposeResult:
        """The question as the box's title, the input, a hint and the error line."""
        with Vertical(id="ask-box"):
            # the suggestion is selected: typing replaces it (End keeps it and appends)
            yield Input(self._value, id="ask-input", select_on_focus=True, compact=True)
            yield Static(self._hint, id="ask-hint")
            yield Static("", id="ask-error")

    def on_mount(self) -> None:
        """Title, and the suggested text selected (typing replaces it)."""
        box = self.query_one("#ask-box")
        box.border_title = self._question
        box.border_subtitle = "Enter: OK · Esc: cancel"
        self.query_one("#ask-hint", Static).display = bool(self._hint)
        self.query_one(Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        problem = self._check(text) if self._check is not None else None
        error = self.query_one("#ask-error", Static)
        if problem:
            error.update(problem)
            error.display = True
            return
        self.dismiss(text)

    def action_cancel(self) -> None:
        """Close without an answer."""
        self.dismiss(None)
