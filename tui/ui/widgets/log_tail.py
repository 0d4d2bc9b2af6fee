"""The server's last log lines, as many as fit, newest at the bottom, never wrapped."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from textual.content import Content
from textual.widget import Widget

from tui.domain.inert import inert

KEEP_LINES = 200
# Access-log lines of the console's own polling (uvicorn logs every /metrics scrape and
# health probe): they would push the server's real output out of a small tail.
_OWN_POLLING = ('"GET /metrics HTTP', '"GET /health HTTP')


def is_polling_noise(line: str) -> bool:
    """Whether ``line`` is an access-log line of the console's own /metrics or /health polls."""
    return any(marker in line for marker in _OWN_POLLING)


class LogTail(Widget):
    """A fixed-height tail of the server log (a ring buffer; older lines fall off).

    The full log stays in the run's log file; this tail is for watching a start.
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._lines: deque[str] = deque(maxlen=KEEP_LINES)

    def set_lines(self, lines: Iterable[str]) -> None:
        """Replace the tail (a new server, or the console starting late)."""
        self._lines.clear()
        self._lines.extend(inert(line, tabs=True) for line in lines if not is_polling_noise(line))
        self.refresh()

    def write(self, line: str) -> None:
        """Append one line (the console's own polling is left out)."""
        if is_polling_noise(line):
            return
        self._lines.append(inert(line, tabs=True))  # the screen never gets a raw escape
        self.refresh()

    @property
    def lines(self) -> list[str]:
        """The lines kept, oldest first."""
        return list(self._lines)

    def render(self) -> Content:
        """The last lines that fit the widget's height."""
        height = max(self.size.height, 1)
        shown = list(self._lines)[-height:]
        if not shown:
            return Content.styled("(no server output yet)", "$text-muted")
        return Content("\n").join(Content.assemble(line.rstrip("\n")) for line in shown)
