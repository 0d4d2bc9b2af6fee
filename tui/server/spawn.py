"""Starting a server process whose log belongs to it, not to the console.

:func:`spawn` starts two processes, each in a session of its own:

- the log relay (:mod:`tui.server.relay`), reading the server's output pipe and writing
  the log file, then a second pipe the console reads;
- the server itself (``subprocess.Popen``), its stdout and stderr on the relay's pipe.

Nothing of the console stands between the server and its log file, so a console that dies
(SIGKILL included) or detaches leaves both running: the file keeps growing for the next
console. ``subprocess.Popen`` never signals its child when it is dropped, unlike asyncio's
subprocess transport (which kills it on close), so a detach only has to stop reading.

The console's side is :class:`OutputLink` (the relay's pipe, read with
``loop.connect_read_pipe``, split into lines) and :class:`ExitWatch` (the server's exit
status through a pidfd on the event loop, or a daemon thread where there is no pidfd;
neither keeps the console from exiting after a detach).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tui.server import children
from tui.server.logbuffer import clean_line
from tui.server.relay import LINE_LIMIT, SYNC_ENV

logger = logging.getLogger(__name__)

RELAY_MODULE = "tui.server.relay"


@dataclass
class Spawned:
    """A server and its relay, just started. ``tee_fd``/``sync_fd`` are the console's ends."""

    proc: subprocess.Popen[bytes]
    relay: subprocess.Popen[bytes]
    tee_fd: int
    sync_fd: int | None
    sync_token: bytes


def _close(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _own_write_end(fd: int) -> int | None:
    """A second, non-blocking open of pipe ``fd``'s write end (its own file status flags).

    ``os.dup`` would share the flags with the server's stdout, and a non-blocking stdout
    makes a busy server's writes fail; reopening through ``/proc`` does not (Linux).
    """
    try:
        return os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None


def spawn(argv: Sequence[str], env: Mapping[str, str], log_path: Path) -> Spawned:
    """Start the relay, then the server (``argv``, environment ``env``); blocking.

    ``log_path`` must already exist (with the header line the caller wrote). Raises
    ``OSError`` when either cannot be started; nothing is left running then.
    """
    token = ("\x1evtc-sync-" + secrets.token_hex(8)).encode()
    out_r, out_w = os.pipe()  # server -> relay
    tee_r, tee_w = os.pipe()  # relay -> console
    try:
        relay = subprocess.Popen(
            [sys.executable, "-m", RELAY_MODULE, str(log_path)],
            stdin=out_r,
            stdout=tee_w,
            stderr=subprocess.DEVNULL,
            env={**env, SYNC_ENV: token.decode()},
            start_new_session=True,  # no terminal: a hang-up never reaches it
        )
    except OSError:
        _close(out_r, out_w, tee_r, tee_w)
        raise
    children.started(relay.pid)  # at once: a listener (a cluster worker's warden) knows it
    _close(out_r, tee_w)  # the relay holds them now
    sync_fd = _own_write_end(out_w)
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out_w,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,  # own session and process group: kill the group
        )
    except OSError:
        _close(out_w, sync_fd, tee_r)  # the relay reads end of file and exits
        with contextlib.suppress(subprocess.TimeoutExpired):
            relay.wait(timeout=5)
        raise
    finally:
        _close(out_w)
    children.started(proc.pid)
    return Spawned(proc=proc, relay=relay, tee_fd=tee_r, sync_fd=sync_fd, sync_token=token)


class ExitWatch:
    """Resolves :attr:`future` with a child's exit status (negative: killed by that signal).

    A pidfd turns readable when the process exits; the event loop watches it, then
    ``Popen.poll`` reaps the child. Without pidfd support a daemon thread waits instead.
    :meth:`release` stops watching without reaping (a detach).
    """

    def __init__(self, proc: subprocess.Popen[bytes], *, use_pidfd: bool = True) -> None:
        self._proc = proc
        self._loop = asyncio.get_running_loop()
        self.future: asyncio.Future[int] = self._loop.create_future()
        self.at: float | None = None
        """When the exit was noticed (``time.monotonic``)."""
        self._fd: int | None = None
        if use_pidfd:
            try:
                self._fd = os.pidfd_open(proc.pid)
                self._loop.add_reader(self._fd, self._readable)
            except (AttributeError, OSError, NotImplementedError):
                _close(self._fd)
                self._fd = None
        if self._fd is None:
            threading.Thread(target=self._wait, name="vtc-exit-watch", daemon=True).start()

    @property
    def method(self) -> str:
        """``pidfd`` or ``thread``: how the exit is noticed."""
        return "pidfd" if self._fd is not None else "thread"

    def _readable(self) -> None:
        self._stop_reading()
        code = self._proc.poll()
        if code is None:  # readable means exited; a reap by someone else shows as None
            code = self._proc.returncode if self._proc.returncode is not None else -1
        self._settle(code)

    def _wait(self) -> None:
        code = self._proc.wait()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self._loop.call_soon_threadsafe(self._settle, code)

    def _settle(self, code: int) -> None:
        if not self.future.done():
            self.at = time.monotonic()
            self.future.set_result(code)

    def _stop_reading(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(ValueError, RuntimeError):  # loop already closed
                self._loop.remove_reader(self._fd)
            _close(self._fd)
            self._fd = None

    def release(self) -> None:
        """Stop watching (the process runs on, unreaped by us; Popen reaps it later)."""
        self._stop_reading()
        if not self.future.done():
            self.future.cancel()


class _LineProtocol(asyncio.Protocol):
    """Splits the relay's output into lines; notices sync tokens and end of file."""

    def __init__(self, on_line: Callable[[str], None], token: bytes) -> None:
        self._on_line = on_line
        self._token = token
        self._buf = bytearray()
        self.sync_seen: asyncio.Event = asyncio.Event()
        self.closed: asyncio.Event = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        self._buf += data
        while True:
            end = self._buf.find(b"\n")
            if end < 0:
                break
            raw = bytes(self._buf[:end])
            del self._buf[: end + 1]
            self._line(raw)
        if len(self._buf) > LINE_LIMIT + 4096:  # the relay cuts lines; this is a backstop
            raw = bytes(self._buf)
            self._buf.clear()
            self._line(raw)

    def _line(self, raw: bytes) -> None:
        if raw == self._token:
            self.sync_seen.set()
            return
        try:
            self._on_line(clean_line(raw.decode("utf-8", errors="replace")))
        except Exception:  # a broken consumer must not stop the reading (logged)
            logger.exception("a log line handler raised")

    def eof_received(self) -> bool | None:
        if self._buf:
            raw = bytes(self._buf)
            self._buf.clear()
            self._line(raw)
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()


class OutputLink:
    """The console's end of a server's output: lines as they come, syncs, detaching."""

    def __init__(
        self,
        transport: asyncio.ReadTransport,
        protocol: _LineProtocol,
        sync_fd: int | None,
        token: bytes,
    ) -> None:
        self._transport = transport
        self._protocol = protocol
        self._sync_fd = sync_fd
        self._token = token

    @classmethod
    async def open(cls, spawned: Spawned, on_line: Callable[[str], None]) -> OutputLink:
        """Start reading ``spawned``'s relay pipe; ``on_line`` gets each line (cleaned)."""
        loop = asyncio.get_running_loop()
        pipe = os.fdopen(spawned.tee_fd, "rb", buffering=0)
        transport, protocol = await loop.connect_read_pipe(
            lambda: _LineProtocol(on_line, spawned.sync_token), pipe
        )
        return cls(transport, protocol, spawned.sync_fd, spawned.sync_token)

    @property
    def closed(self) -> bool:
        """True once the relay's pipe reached end of file (or was closed here)."""
        return self._protocol.closed.is_set()

    async def sync(self, timeout_s: float) -> bool:
        """Wait until every line written to the server's pipe so far has been read.

        Writes the token into the server's pipe behind whatever is there; the relay passes
        it through. ``False`` when that cannot be done (the pipe full, already closed) or
        it does not come back within ``timeout_s``.
        """
        if self._sync_fd is None or self.closed:
            return False
        self._protocol.sync_seen.clear()
        try:
            os.write(self._sync_fd, self._token + b"\n")
        except OSError:  # BlockingIOError: the pipe is full; EPIPE: the relay is gone
            return False
        seen = asyncio.ensure_future(self._protocol.sync_seen.wait())
        closed = asyncio.ensure_future(self._protocol.closed.wait())
        try:
            await asyncio.wait({seen, closed}, timeout=timeout_s, return_when="FIRST_COMPLETED")
        finally:
            seen.cancel()
            closed.cancel()
        return self._protocol.sync_seen.is_set()

    def release_sync(self) -> None:
        """Close the console's write end of the server's pipe (the relay's EOF needs it)."""
        fd, self._sync_fd = self._sync_fd, None
        _close(fd)

    async def drained(self, timeout_s: float) -> bool:
        """Wait for end of file (the relay wrote everything and exited): ``True`` if it came."""
        self.release_sync()
        if self.closed:
            return True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._protocol.closed.wait(), timeout_s)
        return self.closed

    def close(self) -> None:
        """Stop reading: the relay's next write fails and it goes on with the file alone."""
        self.release_sync()
        self._transport.close()


class ServerProcess:
    """A spawned server as the console holds it: its exit status, its output, its relay."""

    def __init__(self, spawned: Spawned, exit_watch: ExitWatch, link: OutputLink) -> None:
        self._spawned = spawned
        self._exit = exit_watch
        self._link = link

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        env: Mapping[str, str],
        log_path: Path,
        on_line: Callable[[str], None],
        on_started: Callable[[int], None],
    ) -> ServerProcess:
        """Spawn (in a thread), watch its exit, call ``on_started(pid)``, then read its lines.

        ``on_started`` runs before the first line can arrive. Raises ``OSError`` when it
        cannot be started.
        """
        spawned = await asyncio.to_thread(spawn, argv, env, log_path)
        exit_watch = ExitWatch(spawned.proc)
        on_started(spawned.proc.pid)
        link = await OutputLink.open(spawned, on_line)
        return cls(spawned, exit_watch, link)

    @property
    def pid(self) -> int:
        """The server's pid (its process group too)."""
        return self._spawned.proc.pid

    @property
    def relay_pid(self) -> int:
        """Its log relay's pid."""
        return self._spawned.relay.pid

    @property
    def exited(self) -> asyncio.Future[int]:
        """Resolves with its exit status (cancelled by :meth:`let_go`)."""
        return self._exit.future

    @property
    def exited_at(self) -> float | None:
        """When its exit was noticed (``time.monotonic``), once it was."""
        return self._exit.at

    @property
    def exit_code(self) -> int | None:
        """Its exit status, once known."""
        future = self._exit.future
        return future.result() if future.done() and not future.cancelled() else None

    async def sync(self, timeout_s: float) -> bool:
        """Wait until every line it wrote so far has been read (see :meth:`OutputLink.sync`)."""
        return await self._link.sync(timeout_s)

    async def finish(self, timeout_s: float) -> int | None:
        """Once its tree is gone: its exit status, the rest of its output, its relay's end.

        One deadline for the three: they follow from the same deaths.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        if not self.exited.done():
            await asyncio.wait({self.exited}, timeout=timeout_s)
        await self._link.drained(max(0.0, deadline - loop.time()))
        relay = self._spawned.relay
        if relay.poll() is None:
            try:
                await asyncio.to_thread(relay.wait, max(0.0, deadline - loop.time()))
            except subprocess.TimeoutExpired:  # a survivor holds its pipe open: it runs on
                logger.info("the log relay (pid %s) runs on until its pipe closes", relay.pid)
        return self.exit_code

    def let_go(self) -> None:
        """Stop reading and watching; the server and its relay run on (idempotent)."""
        self._link.close()
        if not self._exit.future.done():
            self._exit.release()
