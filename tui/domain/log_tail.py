"""The end of a server log as read back from its file, for a run's full view."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LogTail:
    """The last lines of a run's server log, or why there are none (``note``).

    ``note`` also says when the lines are only the end of the file.
    """

    lines: tuple[str, ...]
    note: str = ""
