"""One writer per sweep: a lock per sweep id, held by one process for the whole run.

Two ``vtc sweep`` of one spec (or a console's resume of a sweep another process runs) must
not both run its trials into one journal. :class:`SweepLock` takes an exclusive
``fcntl.flock`` on ``<sweep id>.lock`` beside the journal, without waiting: a second process
is refused at once with one line naming the holder (pid, host, since when), read from the
lock file. The kernel releases a flock when its holder dies (a SIGKILL included), so a
crashed sweep never leaves a stale lock; the file itself stays (deleting it would race
with a process opening it). The descriptor is not inherited by the servers a sweep starts
(Python opens it close-on-exec), so a server outliving its sweep does not hold it either.

Use::

    with SweepLock.for_journal(journal_path(data_dir, spec.sweep_id())):
        ...  # run the sweep

or :meth:`SweepLock.acquire` / :meth:`SweepLock.release` across an asyncio task, and
:func:`lock_holder` to ask, without taking it, who runs a sweep now.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from tui.domain.errors import VtcError
from tui.domain.inert import inert
from tui.store.private import private_dir


@dataclass(frozen=True)
class LockHolder:
    """Who holds a sweep's lock, as it wrote itself into the lock file."""

    pid: int | None
    host: str
    started: str

    def describe(self) -> str:
        """``pid 123 on gpu-box since 2026-11-24T23:40:00Z`` (what it could tell)."""
        pid = f"pid {self.pid}" if self.pid is not None else "another process"
        host = f" on {self.host}" if self.host else ""
        since = f" since {self.started}" if self.started else ""
        return f"{pid}{host}{since}"

    def is_this_process(self) -> bool:
        """Whether this process wrote it (on this host)."""
        return self.pid == os.getpid() and self.host == socket.gethostname()


class SweepLocked(VtcError):
    """Another process runs this sweep."""


def lock_path_for(journal: Path) -> Path:
    """``<sweep id>.lock`` beside ``<sweep id>.jsonl``."""
    return journal.with_suffix(".lock")


def _read_holder(fd: int) -> LockHolder:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = json.loads(os.read(fd, 4096).decode("utf-8", errors="replace") or "{}")
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    pid = data.get("pid")
    return LockHolder(
        pid=pid if isinstance(pid, int) else None,
        host=inert(str(data.get("host", "")))[:100],
        started=inert(str(data.get("started", "")))[:40],
    )


def _open(path: Path) -> int:
    private_dir(path.parent)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    return os.open(path, flags, 0o600)


class SweepLock:
    """The exclusive, non-waiting lock of one sweep (a context manager)."""

    def __init__(self, path: Path, *, sweep_id: str = "", kind: str = "sweep") -> None:
        self.path = path
        self.sweep_id = sweep_id or path.stem
        self.kind = kind  # what the lock guards, in the refusal: "sweep", "calibration"
        self._fd: int | None = None

    @classmethod
    def for_journal(cls, journal: Path) -> SweepLock:
        """The lock of the sweep whose journal is ``journal``."""
        return cls(lock_path_for(journal), sweep_id=journal.stem)

    @property
    def held(self) -> bool:
        """Whether this object holds the lock now."""
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock now, or raise :class:`SweepLocked` naming the holder (never waits)."""
        if self._fd is not None:
            return
        try:
            fd = _open(self.path)
        except OSError as exc:
            raise VtcError(
                f"cannot open the {self.kind}'s lock {self.path}: {exc.strerror or exc}",
                hint="check the data dir's permissions",
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise SweepLocked(
                f"{self.kind} {self.sweep_id} is already running: {holder.describe()}",
                hint=f"one process runs a {self.kind}; stop that one, or wait for it to finish",
            ) from None
        except OSError:
            os.close(fd)
            raise
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": stamp}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(me) + "\n").encode(), 0)
        except OSError as exc:  # a full disk: nothing started, nothing half-written stays
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)
            raise VtcError(
                f"cannot write the {self.kind}'s lock {self.path}: {exc.strerror or exc}",
                hint="nothing was started; free space in the data dir and run it again",
            ) from None
        self._fd = fd

    def release(self) -> None:
        """Let go of the lock (closing the descriptor drops the flock)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # no holder named once nobody holds it
            os.close(fd)

    def __enter__(self) -> SweepLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def lock_holder(journal: Path) -> LockHolder | None:
    """Who runs the sweep of ``journal`` now (``None``: nobody; the lock is not taken)."""
    path = lock_path_for(journal)
    if not path.is_file():
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
