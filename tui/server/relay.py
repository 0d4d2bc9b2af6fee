"""The log relay: the server's output to its log file, and on to the console while it listens.

Run as ``python -m tui.server.relay LOGFILE`` with the server's merged stdout/stderr on
stdin. Each line is cleaned (:func:`~tui.server.logbuffer.clean_line`), its secrets are
redacted, it is appended to ``LOGFILE`` and then written to stdout, a pipe the console
reads. When the console stops reading (a detach, a crash, a SIGKILL) the writes to stdout
fail with EPIPE and the relay goes on with the file alone, so the log keeps growing for the
next console (:class:`tui.server.adopted.AdoptedServer` tails it). It ends at end of file,
when every process of the server's tree has closed the pipe.

The launcher starts it in its own session, apart from both the console and the server:
the terminal's hang-up never reaches it, and stopping the server's process group does not
cut the server's last words short.

A line ending in the console's sync token (``VTC_RELAY_SYNC`` in the environment) is
written to stdout only: the console writes that token into the server's pipe when the
server exits and knows, once it reads it back, that every line written before the exit
has arrived (see :mod:`tui.server.spawn`).

Standard library only, and little of it: it starts with every server.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import BinaryIO

from tui.domain.secret_names import MIN_SECRET_LEN, SECRET_NAME, secret_parts
from tui.server.logbuffer import clean_line, redact
from tui.store.private import open_private_append_bytes

SECRET_KEY = SECRET_NAME  # environment variables whose values are redacted (declared once)
LINE_LIMIT = 1 << 20  # vLLM's engine-config line is long; 1 MiB per line is plenty
SYNC_ENV = "VTC_RELAY_SYNC"
CUT_MARK = " [vtc: line cut at 1 MiB]"


def secrets_from_env(env: Mapping[str, str]) -> list[str]:
    """The values to redact from log lines: those of secret-named variables in ``env``, and
    the secret parts of any value shaped like one (a URL's password, a DSN's)."""
    named = [v for k, v in env.items() if SECRET_KEY.search(k) and len(v) >= MIN_SECRET_LEN]
    shaped = [p for v in env.values() for p in secret_parts(v)]
    return list(dict.fromkeys([*named, *shaped]))


def read_lines(source: BinaryIO, limit: int = LINE_LIMIT) -> Iterable[bytes]:
    """The lines of ``source`` without their newline; a line above ``limit`` is cut."""
    cutting = False
    while True:
        raw = source.readline(limit)
        if not raw:
            return
        complete = raw.endswith(b"\n")
        if not cutting:
            if complete:
                yield raw[:-1]
            else:
                yield raw + CUT_MARK.encode() if len(raw) >= limit else raw
        cutting = not complete and len(raw) >= limit


class _Tee:
    """stdout while the console reads it; nothing once it has gone away."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    def write(self, data: bytes) -> None:
        if self._fd is None:
            return
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:  # EPIPE: the console stopped reading (detached, or died)
            self.close()

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.close(fd)


def relay(
    source: BinaryIO,
    log_path: Path,
    secrets: list[str],
    tee_fd: int | None = None,
    sync_token: bytes = b"",
) -> int:
    """Copy ``source`` line by line to ``log_path`` (and ``tee_fd``) until end of file."""
    ordered = sorted({s for s in secrets if s}, key=len, reverse=True)
    tee = _Tee(tee_fd)
    # Unbuffered, O_APPEND: one write per line, so the console's own notes interleave whole.
    # Created 0600 in a 0700 folder: a log may echo prompts.
    with open_private_append_bytes(log_path) as log:
        write_line = _writer(log.write, tee, ordered)
        for raw in read_lines(source):
            if sync_token and raw.endswith(sync_token):
                head = raw[: -len(sync_token)]
                if head:
                    write_line(head)
                tee.write(sync_token + b"\n")
                continue
            write_line(raw)
    tee.close()
    return 0


def _writer(
    file_write: Callable[[bytes], object], tee: _Tee, secrets: list[str]
) -> Callable[[bytes], None]:
    def write_line(raw: bytes) -> None:
        line = redact(clean_line(raw.decode("utf-8", errors="replace")), secrets)
        data = (line + "\n").encode("utf-8", errors="replace")
        with contextlib.suppress(OSError):  # a full disk: the console still gets the line
            file_write(data)
        tee.write(data)

    return write_line


def main(argv: list[str] | None = None) -> int:
    """``python -m tui.server.relay LOGFILE``: stdin is the server's output, stdout the tee."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tui.server.relay LOGFILE", file=sys.stderr)
        return 2
    token = os.environ.get(SYNC_ENV, "").encode()
    return relay(sys.stdin.buffer, Path(args[0]), secrets_from_env(os.environ), 1, token)


if __name__ == "__main__":
    sys.exit(main())
