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


class InertWriter:
    """A text stream that cleans what it is given and passes it on to ``raw``."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        """Write ``text`` made inert; returns the length given, as ``TextIO.write`` does."""
        self.raw.write(inert_lines(text))
        return len(text)

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
