"""One chart of the history screen: a number's name, its newest value and range, a sparkline."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from tui.ui.telemetry_view import spark

Format = Callable[[float], str]


class HistoryChart(Widget):
    """Two lines: ``label  now 43%  min 0%  max 97%``, then the sparkline (0 at the bottom)."""

    DEFAULT_CSS = """
    HistoryChart {
        height: 2;
    }
    """

    values: reactive[tuple[float, ...]] = reactive(())

    def __init__(self, label: str, fmt: Format, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.label = label
        self._fmt = fmt

    def show(self, values: Sequence[float]) -> None:
        """Draw ``values`` (oldest first)."""
        self.values = tuple(values)

    def render(self) -> Content:
        """The label line and the sparkline."""
        values = self.values
        if not values:
            head = Content.assemble((self.label, "bold"), ("  no readings yet", "$text-muted"))
            return Content("\n").join([head, Content("")])
        fmt = self._fmt
        head = Content.assemble(
            (self.label, "bold"),
            f"  now {fmt(values[-1])}",
            (f"  min {fmt(min(values))}  max {fmt(max(values))}", "$text-muted"),
        )
        line = spark(values, max(self.size.width, 1))
        return Content("\n").join([head, Content.styled(line, "$accent")])
