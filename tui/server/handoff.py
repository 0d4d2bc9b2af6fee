"""Detaching: the console goes away (SSH dropped, tmux pane killed), the server it started runs on.

The supervisor starts the server in its own session, so the terminal's hang-up never
reaches it. Two things would still end it or cripple it when the console exits:

- asyncio kills a child process whose transport is closed or garbage-collected
  (``BaseSubprocessTransport.close``, CPython 3.11 ``asyncio/base_subprocess.py``);
- the server's stdout/stderr is a pipe to the console: with its only reader gone every log
  line fails with EPIPE, and the log file (which the console wrote) stops growing.

:class:`DetachableSupervisor` adds :meth:`~DetachableSupervisor.detach` to the
:class:`~tui.server.supervisor.Supervisor`: it stops watching, hands the read end of the
output pipe to a small relay process (this module run as ``python -m tui.server.handoff
LOGFILE``) that goes on appending the server's lines to the same log file, and disarms the
transport. The relay runs in its own session too and ends by itself at end of file, when the
server's whole tree has exited. The next ``vtc`` tails that log file
(:class:`tui.server.adopted.AdoptedServer`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

from tui.domain.events import ServerState
from tui.server.logbuffer import LogBuffer, clean_line
from tui.server.supervisor import _MIN_SECRET_LEN, _SECRET_KEY, Supervisor

logger = logging.getLogger(__name__)


def secrets_from_env(env: Mapping[str, str]) -> list[str]:
    """The values to redact from log lines: the supervisor's rule, applied to ``env``."""
    return [
        value
        for key, value in env.items()
        if _SECRET_KEY.search(key) and len(value) >= _MIN_SECRET_LEN
    ]


def start_log_relay(fd: int, log_path: Path, env: Mapping[str, str]) -> int:
    """Start a relay that appends what ``fd`` (a pipe's read end) carries to ``log_path``.

    The relay gets its own session (no terminal, so no hang-up) and no other descriptor;
    secrets reach it through ``env`` only. Returns its pid.
    """
    relay = subprocess.Popen(
        [sys.executable, "-m", "tui.server.handoff", str(log_path)],
        stdin=fd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(env),
        start_new_session=True,
        close_fds=True,
    )
    return relay.pid


def relay(stream: BinaryIO, log_path: Path, secrets: list[str]) -> int:
    """Copy ``stream`` line by line to ``log_path`` (cleaned, secrets redacted) until EOF."""
    # The pipe was asyncio's: its open file description is non-blocking, shared with us.
    os.set_blocking(stream.fileno(), True)
    log = LogBuffer(max_lines=1, path=log_path, secrets=secrets)
    try:
        for raw in iter(stream.readline, b""):
            log.append(clean_line(raw.decode("utf-8", errors="replace")))
    finally:
        log.close()
    return 0


class DetachableSupervisor(Supervisor):
    """A :class:`Supervisor` that can let its server run on after the console exits."""

    async def detach(self) -> bool:
        """Stop watching the server and leave it running; its log goes on to its log file.

        Returns ``False`` (and changes nothing) when there is no running server to leave.
        After a detach this supervisor neither watches nor stops the server: a state file
        lets the next console adopt it.
        """
        proc, transport = self._proc, self._transport
        if (
            proc is None
            or transport is None
            or proc.returncode is not None
            or self._state not in (ServerState.STARTING, ServerState.READY)
        ):
            return False
        watcher = self._watcher
        if watcher is not None and not watcher.done():
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        pipe = transport.get_pipe_transport(1)
        if pipe is not None and not pipe.is_closing():
            # Stop taking data from the pipe, let the reader store the complete lines it
            # already holds, then hand the pipe to the relay. (A line half-read at this
            # instant may be cut in two.)
            pipe.pause_reading()  # type: ignore[attr-defined]
            for _ in range(3):
                await asyncio.sleep(0)
        await self._stop_reader()
        log_path = self._log.path
        if pipe is not None and not pipe.is_closing() and log_path is not None:
            source = pipe.get_extra_info("pipe")
            try:
                relay_pid = start_log_relay(source.fileno(), log_path, self._merged_env())
                self._log.append(f"[vtc] detached: the log goes on here (relay pid {relay_pid})")
            except OSError as exc:  # the server runs on; only its later lines are lost
                logger.warning("cannot start the log relay: %s", exc)
        self._log.close()
        if pipe is not None:
            pipe.close()
        # Disarm asyncio's kill-on-close (see the module docstring): the transport counts as
        # closed, so neither close() nor its garbage collection signals the server.
        transport._closed = True  # type: ignore[attr-defined]
        return True

    async def _stop_reader(self) -> None:
        reader = self._reader
        if reader is not None and not reader.done():
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader


def main(argv: list[str] | None = None) -> int:
    """``python -m tui.server.handoff LOGFILE``: the relay (stdin is the server's output)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tui.server.handoff LOGFILE", file=sys.stderr)
        return 2
    return relay(sys.stdin.buffer, Path(args[0]), secrets_from_env(os.environ))


if __name__ == "__main__":
    sys.exit(main())
