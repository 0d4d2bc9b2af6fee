"""Reading a log of any size, or an endless stream, in bounded memory and time.

``vtc diagnose`` needs the start of a log (the banner, the arguments, the engine config) and
its end (the failure). :func:`read_log_excerpt` keeps the first :data:`HEAD_BYTES` and the last
:data:`TAIL_BYTES`: a regular file is read at both ends directly (its size does not matter);
a stream (``-`` for standard input, a pipe, a device) is read through, keeping a rolling tail,
and is cut after :data:`STREAM_LIMIT_BYTES` or :data:`DEADLINE_S` seconds, whichever comes
first, so that ``yes | vtc diagnose -`` or ``vtc diagnose /dev/zero`` ends with an answer.
"""

from __future__ import annotations

import os
import select
import stat
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tui.domain.errors import VtcError

HEAD_BYTES: Final = 256 * 1024
TAIL_BYTES: Final = 2 * 1024 * 1024
STREAM_LIMIT_BYTES: Final = 512 * 1024**2
DEADLINE_S: Final = 15.0
CHUNK_BYTES: Final = 1024 * 1024


class LogReadError(VtcError):
    """The log could not be read (missing, a directory, no permission)."""


@dataclass(frozen=True)
class LogExcerpt:
    """The text kept from a log and what was left out.

    ``omitted_bytes``: bytes between the head and the tail that were not kept. ``complete``:
    the input was read to its end (``False`` when a stream was cut by the limit or deadline).
    """

    text: str
    bytes_seen: int
    omitted_bytes: int = 0
    complete: bool = True
    stopped_by: str = ""

    def note(self) -> str:
        """One line saying what was left out, empty when nothing was."""
        parts: list[str] = []
        if self.omitted_bytes:
            parts.append(
                f"read the first {HEAD_BYTES // 1024} KiB and the last {TAIL_BYTES // 2**20} MiB "
                f"of {self.bytes_seen:,} bytes"
            )
        if not self.complete:
            parts.append(
                f"stopped reading at the {self.stopped_by} ({self.bytes_seen:,} bytes; pass a "
                "file rather than a stream to read its end)"
            )
        return "; ".join(parts)


def _decode(head: bytes, tail: bytes, omitted: int) -> str:
    text = head.decode("utf-8", errors="replace")
    if omitted or tail:
        if omitted:
            text += f"\n[vtc: {omitted} bytes of the log left out here]\n"
        text += tail.decode("utf-8", errors="replace")
    return text


def _read_regular(fd: int, size: int, head_bytes: int, tail_bytes: int) -> LogExcerpt:
    if size <= head_bytes + tail_bytes:
        data = os.pread(fd, size, 0)  # what is there now, not what a writer appends meanwhile
        return LogExcerpt(_decode(data, b"", 0), len(data))
    head = os.pread(fd, head_bytes, 0)
    tail = os.pread(fd, tail_bytes, size - tail_bytes)
    omitted = size - len(head) - len(tail)
    return LogExcerpt(_decode(head, tail, omitted), size, omitted)


def _read_stream(
    fd: int, head_bytes: int, tail_bytes: int, limit: int, deadline_s: float
) -> LogExcerpt:
    head = bytearray()
    tail: deque[bytes] = deque()
    tail_size = 0
    seen = 0
    end = time.monotonic() + deadline_s
    stopped = ""
    while True:
        remaining = end - time.monotonic()
        if remaining <= 0:
            stopped = "time limit"
            break
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            stopped = "time limit"
            break
        try:
            chunk = os.read(fd, CHUNK_BYTES)
        except BlockingIOError:  # a non-blocking stream with nothing after all: wait again
            continue
        if not chunk:
            break
        seen += len(chunk)
        if len(head) < head_bytes:
            take = head_bytes - len(head)
            head += chunk[:take]
            chunk = chunk[take:]
        if chunk:
            tail.append(chunk)
            tail_size += len(chunk)
            while tail and tail_size - len(tail[0]) >= tail_bytes:
                tail_size -= len(tail.popleft())
        if seen >= limit:
            stopped = "size limit"
            break
    tail_data = b"".join(tail)[-tail_bytes:] if tail else b""
    omitted = seen - len(head) - len(tail_data)
    return LogExcerpt(_decode(bytes(head), tail_data, omitted), seen, omitted, not stopped, stopped)


def read_log_excerpt(
    source: str | Path,
    *,
    head_bytes: int = HEAD_BYTES,
    tail_bytes: int = TAIL_BYTES,
    stream_limit_bytes: int = STREAM_LIMIT_BYTES,
    deadline_s: float = DEADLINE_S,
) -> LogExcerpt:
    """The head and tail of the log at ``source`` (``-``: standard input).

    Raises :class:`LogReadError` (one line) when it cannot be opened or read.
    """
    name = str(source)
    try:
        if name == "-":
            fd = sys.stdin.fileno()
            return _read_any(fd, head_bytes, tail_bytes, stream_limit_bytes, deadline_s)
        # Never waits to open (a FIFO without a writer); a stream is then read to a deadline.
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
        try:
            return _read_any(fd, head_bytes, tail_bytes, stream_limit_bytes, deadline_s)
        finally:
            os.close(fd)
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        where = "standard input" if name == "-" else name
        raise LogReadError(f"cannot read {where}: {why}") from exc


def _read_any(
    fd: int, head_bytes: int, tail_bytes: int, limit: int, deadline_s: float
) -> LogExcerpt:
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(21, "Is a directory")
    if stat.S_ISREG(info.st_mode) and info.st_size > 0:  # /proc files say 0: read them through
        return _read_regular(fd, info.st_size, head_bytes, tail_bytes)
    return _read_stream(fd, head_bytes, tail_bytes, limit, deadline_s)


def log_text(path: str | Path | None) -> str:
    """The head and tail of the log at ``path``; "" when there is none or it cannot be read
    (a missing log never stops what reads it: a calibration, a twin's fit)."""
    if path is None:
        return ""
    try:
        return read_log_excerpt(path).text
    except LogReadError:
        return ""
