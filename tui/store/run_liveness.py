"""Records follow their server: a run still "live" whose server is gone is closed as lost.

After the console was hung up (it detaches; the server keeps serving) and the server then
died, or was stopped by something other than vtc, the history still said ``ready``. The next
reader of the history (``vtc runs``/``export``/``report``, the next console) calls
:func:`settle_gone_runs` first: each run still ``starting``/``ready`` whose recorded server
process (``RunRecord.server_pid``, with its argv) no longer runs is closed as ``lost``, with
the time it was last seen (its log file's last write, the server's last sign of life; else
now). A run without a recorded pid (an attached server, a record from before) is left as it
is: nothing here can tell whether it still serves. ``vtc stop`` closes the record of the
server it stops (:func:`close_stopped_run`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import psutil

from tui.domain.results import RunRecord, RunStatus
from tui.store.history import HistoryError, RunStore


def server_alive(record: RunRecord) -> bool:
    """Whether ``record``'s server process still runs (same pid, same argv when known)."""
    pid = record.server_pid
    if pid is None:
        return True  # not ours to judge
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            if proc.status() == psutil.STATUS_ZOMBIE:
                return False
            cmdline = proc.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True  # another user's process under that pid: cannot tell, keep the run
    want = record.repro.argv if record.repro is not None else []
    if not want:
        return True
    return cmdline == want or (len(cmdline) > len(want) and cmdline[-len(want) :] == want)


def last_seen(record: RunRecord, now: datetime) -> datetime:
    """When the server last showed life: its log file's last write, else ``now``."""
    if record.log_path:
        try:
            return datetime.fromtimestamp(os.stat(record.log_path).st_mtime, UTC)
        except (OSError, ValueError):
            pass
    return now


def settle_gone_runs(
    store: RunStore,
    *,
    alive: Callable[[RunRecord], bool] = server_alive,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> list[RunRecord]:
    """Close as ``lost`` every live run whose server is gone; returns the runs closed."""
    closed = []
    for record in store.list(limit=1000):
        if not record.status.live or record.server_pid is None or alive(record):
            continue
        seen = last_seen(record, now())
        lost = record.model_copy(
            update={
                "status": RunStatus.LOST,
                "last_seen": seen,
                "ended_because": f"its server (pid {record.server_pid}) is gone; last seen "
                f"{seen:%Y-%m-%d %H:%M:%S} UTC",
            }
        )
        store.update(lost)
        closed.append(lost)
    return closed


def close_stopped_run(history: Path, run_id: int, why: str) -> RunRecord | None:
    """Close run ``run_id`` in ``history`` as ``stopped`` (``vtc stop`` stopped its server).

    Only a run still live changes (a console watching it may have closed it already).
    """
    if not history.is_file():
        return None
    try:
        store = RunStore(history)
    except HistoryError:
        return None
    try:
        record = next((r for r in store.list(limit=1000) if r.id == run_id), None)
        if record is None or not record.status.live:
            return None
        stopped = record.model_copy(
            update={
                "status": RunStatus.STOPPED,
                "ended_because": why,
                "last_seen": datetime.now(UTC),
            }
        )
        store.update(stopped)
        return stopped
    finally:
        store.close()
