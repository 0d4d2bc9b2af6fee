"""A bounded ring buffer of server log lines that also appends every line to a log file.

The console shows the newest lines and diagnoses a failed start from them, while the file
keeps the whole run for ``vtc diagnose LOGFILE`` and for the run's history. One writer (the
backend's log reader) appends; any thread may read a copy at the same time. Standard
library only: the log relay (:mod:`tui.server.relay`) imports it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TextIO, overload

from tui.domain.inert import inert
from tui.store.private import open_private_append_text

DEFAULT_MAX_LINES = 10_000
"""Enough for a whole failed start (a few hundred lines) plus a long tail of a served run."""

REDACTED = "***"


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` replaced by ``***`` (give the longest first)."""
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


def clean_line(raw: str) -> str:
    """One display line from one raw output line.

    Drops the trailing newline, keeps only the last state of a carriage-return progress bar
    (tqdm redraws a line with ``\\r`` when it is not a tty), and makes the rest inert: every
    escape sequence (colour codes, and an OSC 52 clipboard write or a title a client put into
    the log) and every control character but a tab goes (:func:`tui.domain.inert.inert`).
    """
    line = raw.rstrip("\r\n")
    if "\r" in line:
        parts = [p for p in line.split("\r") if p.strip()]
        line = parts[-1] if parts else ""
    return inert(line, tabs=True)


class LogBuffer(Sequence[str]):
    """The newest ``max_lines`` lines in memory, and every line in ``path`` (if given).

    A read-only ``Sequence[str]`` of the ring's lines, oldest first (``buf[-1]`` is the
    newest line).

    ``secrets`` are replaced by ``***`` before a line is stored anywhere, so an API key or
    token that a server echoes never reaches the screen, the file or an export.
    """

    def __init__(
        self,
        max_lines: int = DEFAULT_MAX_LINES,
        path: Path | None = None,
        *,
        secrets: Iterable[str] = (),
    ) -> None:
        if max_lines < 1:
            raise ValueError(f"max_lines must be at least 1, got {max_lines}")
        self._lines: deque[str] = deque(maxlen=max_lines)
        self._lock = threading.Lock()
        self._total = 0
        # Longest first, so a secret that contains another is replaced whole.
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._path = path
        self._file: TextIO | None = None
        if path is not None:
            # Line-buffered: a crash of the console loses at most the current line. 0600.
            self._file = open_private_append_text(path)

    @property
    def path(self) -> Path | None:
        """The log file every line is appended to, if any."""
        return self._path

    @property
    def max_lines(self) -> int:
        """How many lines the ring keeps."""
        maxlen = self._lines.maxlen
        assert maxlen is not None
        return maxlen

    @property
    def total(self) -> int:
        """Lines appended since creation (including those the ring has dropped)."""
        return self._total

    @property
    def dropped(self) -> int:
        """Lines no longer in the ring (still in the file)."""
        return self._total - len(self._lines)

    def redact(self, text: str) -> str:
        """``text`` with every configured secret replaced by ``***``."""
        return redact(text, self._secrets)

    def append(self, line: str) -> str:
        """Store one line (already without its newline); returns the line as stored."""
        stored = self.redact(line)
        with self._lock:
            self._lines.append(stored)
            self._total += 1
            if self._file is not None:
                self._file.write(stored + "\n")
        return stored

    def write_file_only(self, line: str) -> None:
        """Append a line to the file but not to the ring (e.g. a header naming the command)."""
        with self._lock:
            if self._file is not None:
                self._file.write(self.redact(line) + "\n")

    def lines(self) -> list[str]:
        """A copy of the lines in the ring, oldest first."""
        with self._lock:
            return list(self._lines)

    def tail(self, n: int) -> list[str]:
        """The newest ``n`` lines, oldest first."""
        if n <= 0:
            return []
        with self._lock:
            size = len(self._lines)
            return [self._lines[i] for i in range(max(0, size - n), size)]

    def text(self) -> str:
        """The ring's lines joined with newlines (what :func:`diagnose` reads)."""
        return "\n".join(self.lines())

    def flush(self) -> None:
        """Flush the file."""
        with self._lock:
            if self._file is not None:
                self._file.flush()

    def close(self) -> None:
        """Close the file; the ring stays readable and further lines stay in memory only."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __len__(self) -> int:
        return len(self._lines)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        with self._lock:
            if isinstance(index, slice):
                return list(self._lines)[index]
            return self._lines[index]

    def __iter__(self) -> Iterator[str]:
        return iter(self.lines())
