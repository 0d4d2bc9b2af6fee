"""What the headless commands write to stdout/stderr, made inert on its way out.

``vtc diagnose``, ``top``, ``runs``, ``bench``, ``sweep``, ``presets``, ``stop`` print text
that came from outside (log excerpts, model ids, metric labels, error bodies, file names).
Rather than trust every ``print`` to clean its arguments, :func:`inert_output` puts an
:class:`InertWriter` in front of both streams for the command's lifetime: whatever is
written loses its escape sequences and controls but tabs and newlines
(:func:`tui.domain.inert.inert_lines`). Each write is cleaned whole, and the output never
holds an ESC or a C1 byte, so a sequence split over two writes cannot be completed either.
A command's own control sequence (the sweep's updating line) goes to :attr:`InertWriter.raw`.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from tui.domain.inert import inert_lines

LINE_LIMIT = 64 * 1024
"""The most characters one printed line may have; the rest of it is cut with a mark. Far
above any line vtc makes itself (a ``vtc runs --json`` record is a few KiB), far below what
a 1 MiB model id from a server would make of a line."""
CUT_MARK = " [vtc: line cut]"


class InertWriter:
    """A text stream that cleans what it is given, bounds each line to :data:`LINE_LIMIT`
    characters (over any number of writes) and passes it on to ``raw``."""

    def __init__(self, raw: TextIO, line_limit: int = LINE_LIMIT) -> None:
        self.raw = raw
        self._limit = line_limit
        self._column = 0  # characters of the current line written so far

    def write(self, text: str) -> int:
        """Write ``text`` made inert; returns the length given, as ``TextIO.write`` does."""
        self.raw.write(self._bounded(inert_lines(text)))
        return len(text)

    def _bounded(self, text: str) -> str:
        pieces = text.split("\n")
        out: list[str] = []
        for i, piece in enumerate(pieces):
            if i:
                out.append("\n")
                self._column = 0
            room = self._limit - self._column
            if len(piece) <= room:
                out.append(piece)
                self._column += len(piece)
            elif room > 0:  # the line goes over here: the mark, then nothing till its end
                out.append(piece[:room] + CUT_MARK)
                self._column = self._limit
        return "".join(out)

    def writelines(self, lines: Any) -> None:
        """Write each of ``lines``."""
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        # flush, isatty, fileno, encoding...: the stream's own.
        return getattr(self.raw, name)


def raw_stream(out: TextIO) -> TextIO:
    """The terminal behind ``out`` (for a command's own control sequences)."""
    raw = getattr(out, "raw", None)
    return raw if isinstance(out, InertWriter) and raw is not None else out


@contextlib.contextmanager
def inert_output() -> Iterator[None]:
    """stdout and stderr through :class:`InertWriter` while the block runs."""
    saved = sys.stdout, sys.stderr
    sys.stdout = InertWriter(saved[0])
    sys.stderr = InertWriter(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
