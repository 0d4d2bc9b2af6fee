"""The state file of a launched server, and whether the server it records still runs.

- :class:`ServerStateKeeper` keeps ``server.json`` (:mod:`tui.store.server_state`) in step
  with the server a console launches: written at launch, released (the console no longer
  watches) at a detach, removed when the server stops or exits.
- :func:`inspect_state_file` decides, when the next ``vtc`` starts, whether the recorded
  server still runs: the same pid *with the same creation time* (a pid the kernel reused
  for another process is never acted on) and the same command line. A stale file is
  removed with a notice.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import psutil

from tui.domain.flags.serve import ServeFlags
from tui.server.process import (
    ProcessInfo,
)
from tui.store.server_state import ServerStateError, ServerStateFile, ServerStateRecord

logger = logging.getLogger(__name__)

_SAME_PROCESS_S = 0.01  # create_time tolerance (ProcessInfo uses the same)


# -- is it still running? ---------------------------------------------------------------------
def argv_matches(cmdline: Sequence[str], argv: Sequence[str]) -> bool:
    """Whether a running process's ``cmdline`` is the recorded ``argv``.

    Equal, or ``argv`` behind an interpreter: a ``vllm`` console script runs as
    ``python /path/vllm serve ...`` (the kernel puts the ``#!`` interpreter in front).
    """
    cmd, want = list(cmdline), list(argv)
    if not want:
        return False
    return cmd == want or (len(cmd) > len(want) and cmd[-len(want) :] == want)


@dataclass(frozen=True)
class StateCheck:
    """What :func:`check_record` found about a recorded server."""

    running: bool
    reason: str = ""  # why it is not running, when it is not
    console_pid: int | None = None  # a live console that watches it now, if any


def _alive(pid: int | None, create_time: float | None) -> bool:
    if pid is None or create_time is None:
        return False
    return ProcessInfo(pid=pid, create_time=create_time).is_alive()


def check_record(record: ServerStateRecord) -> StateCheck:
    """Whether the process ``record`` names still runs: same pid, start time and argv."""
    try:
        proc = psutil.Process(record.pid)
        with proc.oneshot():
            created = proc.create_time()
            status = proc.status()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return StateCheck(False, f"pid {record.pid} has exited")
    except psutil.AccessDenied:
        return StateCheck(False, f"pid {record.pid} cannot be inspected (access denied)")
    if status == psutil.STATUS_ZOMBIE:
        return StateCheck(False, f"pid {record.pid} has exited")
    if abs(created - record.create_time) > _SAME_PROCESS_S:
        when = datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return StateCheck(
            False, f"pid {record.pid} now belongs to another process (started {when})"
        )
    try:
        cmdline = proc.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return StateCheck(False, f"pid {record.pid} has exited")
    except psutil.AccessDenied:
        cmdline = list(record.argv)  # the start time already matched: trust it
    if not argv_matches(cmdline, record.argv):
        shown = " ".join(cmdline)[:80]
        return StateCheck(False, f"pid {record.pid} runs something else: {shown}")
    console = record.console_pid
    if console is not None and not _alive(console, record.console_create_time):
        console = None
    return StateCheck(True, console_pid=console)


@dataclass(frozen=True)
class Inspection:
    """The state file as a new console finds it: a server to adopt, and/or a notice."""

    record: ServerStateRecord | None = None  # running and free: adopt it
    notice: str | None = None  # what the operator should be told


def inspect_state_file(file: ServerStateFile) -> Inspection:
    """Read ``file`` at startup; remove it when it is stale (never acting on its pid)."""
    try:
        record = file.read()
    except ServerStateError as exc:
        file.remove()
        return Inspection(notice=f"Removed an unreadable server state file: {exc}")
    if record is None:
        return Inspection()
    check = check_record(record)
    if not check.running:
        file.remove(pid=record.pid)
        return Inspection(
            notice=f"Removed a stale server state file ({record.base_url}): {check.reason}."
        )
    if check.console_pid is not None:
        return Inspection(
            notice=f"The server vtc started at {record.base_url} (pid {record.pid}) is "
            f"watched by another vtc console (pid {check.console_pid}): left to it."
        )
    return Inspection(
        record=record,
        notice=f"Reattached to the server vtc started earlier: pid {record.pid} at "
        f"{record.base_url}.",
    )


# -- the state file, kept in step with the running server -------------------------------------
def _create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None


class ServerStateKeeper:
    """Writes, releases and removes the state file for the server a console runs."""

    def __init__(self, file: ServerStateFile, *, mode: str) -> None:
        self.file = file
        self.mode = mode
        self._pid: int | None = None

    @property
    def pid(self) -> int | None:
        """The server this keeper recorded (and still holds the file for)."""
        return self._pid

    def holds(self, pid: int) -> bool:
        """Whether the state file is this console's record of ``pid``."""
        if self._pid != pid:
            return False
        try:
            record = self.file.read()
        except ServerStateError:
            return False
        return record is not None and record.pid == pid

    def record(
        self,
        *,
        pid: int,
        argv: Sequence[str],
        base_url: str,
        flags: ServeFlags | None,
        log_path: str | None,
        run_id: int | None,
    ) -> bool:
        """Record a server this console now watches; ``False`` if the file is another's.

        A file that names another server which still runs is left alone: that server
        belongs to another console (or was left by one), and only one can be reattached.
        """
        existing: ServerStateRecord | None
        try:
            existing = self.file.read()
        except ServerStateError:
            existing = None
        if existing is not None and existing.pid != pid and check_record(existing).running:
            return False
        created = _create_time(pid)
        if created is None:
            return False  # already gone: nothing to reattach to
        me = psutil.Process()
        self.file.write(
            ServerStateRecord(
                pid=pid,
                pgid=pid,  # started with start_new_session: it leads its own group
                create_time=created,
                base_url=base_url,
                argv=list(argv),
                flags=flags.model_dump(mode="json", exclude_none=True) if flags is not None else {},
                log_path=log_path,
                run_id=run_id,
                mode=self.mode,
                started_at=(
                    existing.started_at
                    if existing is not None and existing.pid == pid
                    else datetime.now(UTC)
                ),
                console_pid=me.pid,
                console_create_time=me.create_time(),
            )
        )
        self._pid = pid
        return True

    def release(self, pid: int) -> bool:
        """The console detaches: the file stays, naming no console (the next may adopt)."""
        if not self.holds(pid):
            return False
        record = self.file.read()
        assert record is not None
        released = record.model_copy(update={"console_pid": None, "console_create_time": None})
        self.file.write(released)
        self._pid = None
        return True

    def forget(self, pid: int | None) -> None:
        """The server stopped or exited: remove its file (only if it still names it)."""
        if pid is None or self._pid != pid:
            return
        self._pid = None
        try:
            self.file.remove(pid=pid)
        except OSError as exc:  # a leftover file is found stale and removed next time
            logger.warning("cannot remove %s: %s", self.file.path, exc)
