"""The form's twin line: what the twin of the server predicts for the edited flags.

One line under the pre-flight box: ``predicted (twin NAME r1, ±7%): starts, KV 131,072
tok · 2,345 tok/s · p99 TTFT 120 ms · p99 E2EL 2.10 s``, or that the command would not
start and why, or a calibration's progress. Hidden while there is nothing to say (no
profile of this model). Its text comes from outside (a profile's name, vLLM's message):
shown as text, never as markup.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static


class TwinLine(Static):
    """One line of predicted figures, or a calibration's progress (empty: hidden)."""

    DEFAULT_CSS = """
    TwinLine { height: auto; color: $text-muted; display: none; }
    TwinLine.-missed { color: $warning; }
    """

    def show(self, text: str | None, *, warn: bool = False) -> None:
        """Show ``text`` (``None``: hide the line)."""
        self.update(Content(text or ""))
        self.set_class(warn, "-missed")
        self.display = bool(text)
