"""Process-tree helpers (psutil): snapshot a tree, terminate it with escalation, verify.

Why the care (vllm-cpu-findings.md, "Processes and signals"): ``vllm serve`` runs as the API
server -> ``resource_tracker`` and ``VLLM::EngineCore`` -> ``VLLM::Worker``. SIGKILL of the
API server alone orphans the others to PID 1, where they keep gigabytes of memory (GPU
memory on a GPU) forever; and with streams in flight the API server ignores SIGTERM until
its clients disconnect. So the supervisor launches the server in its own process group,
remembers every PID it has seen in the tree while the parent lived (an orphan is no longer
anyone's descendant), and stops with SIGTERM to the group, a grace period, then SIGKILL to
the group and to every remembered survivor, and finally checks that none is left.

A remembered process is identified by PID *and* creation time, so a PID the kernel reuses
for an unrelated process is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import psutil

STOP_GRACE_S = 10.0
"""Seconds between SIGTERM and SIGKILL when vtc stops a server (the console, ``vtc stop``,
the sweeps): the one default every stop path takes."""

_POLL_S = 0.02


@dataclass(frozen=True)
class ProcessInfo:
    """One process of a tree, as seen in a snapshot."""

    pid: int
    create_time: float
    name: str = ""

    def process(self) -> psutil.Process | None:
        """The live process, or ``None`` if it is gone or its PID now belongs to another."""
        try:
            proc = psutil.Process(self.pid)
            if abs(proc.create_time() - self.create_time) > 0.01:
                return None
            return proc
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return None

    def is_alive(self) -> bool:
        """True while the process runs; a zombie (exited, not yet reaped) counts as gone."""
        proc = self.process()
        if proc is None:
            return False
        try:
            return proc.status() != psutil.STATUS_ZOMBIE
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            return False
        except psutil.AccessDenied:
            return True


def _info(proc: psutil.Process) -> ProcessInfo | None:
    try:
        with proc.oneshot():
            return ProcessInfo(pid=proc.pid, create_time=proc.create_time(), name=proc.name())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def snapshot_tree(pid: int) -> list[ProcessInfo]:
    """``pid`` and all its descendants now (root first); empty if ``pid`` is gone."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return []
    return [info for info in (_info(p) for p in procs) if info is not None]


def group_members(pgid: int) -> list[ProcessInfo]:
    """Every live process whose process group is ``pgid`` (orphans included)."""
    members: list[ProcessInfo] = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) != pgid:
                continue
        except (ProcessLookupError, PermissionError):
            continue
        info = _info(proc)
        if info is not None and info.is_alive():
            members.append(info)
    return members


def survivors(processes: Iterable[ProcessInfo]) -> list[ProcessInfo]:
    """The processes among ``processes`` that are still alive."""
    return [p for p in processes if p.is_alive()]


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Send ``sig`` to process group ``pgid``; False if the group no longer exists."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return False


def signal_each(processes: Iterable[ProcessInfo], sig: signal.Signals) -> None:
    """Send ``sig`` to each live process in ``processes`` (identity checked first)."""
    for info in processes:
        proc = info.process()
        if proc is None:
            continue
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
            proc.send_signal(sig)


def wait_gone(processes: Iterable[ProcessInfo], timeout_s: float) -> list[ProcessInfo]:
    """Wait up to ``timeout_s`` for all ``processes`` to end; returns those still alive.

    Polls instead of ``waitpid``, so it never reaps a child that asyncio's child watcher
    owns (that would lose the exit code).
    """
    pending = list(processes)
    deadline = time.monotonic() + max(0.0, timeout_s)
    while True:
        pending = survivors(pending)
        if not pending or time.monotonic() >= deadline:
            return pending
        time.sleep(_POLL_S)


@dataclass
class TerminationReport:
    """What :func:`terminate_tree` did and whether anything survived."""

    signalled: list[ProcessInfo] = field(default_factory=list)
    escalated: bool = False  # SIGKILL was needed
    survivors: list[ProcessInfo] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """True when no process of the tree is left."""
        return not self.survivors


def _live_group(pgid: int | None, known: list[ProcessInfo]) -> bool:
    """True if ``pgid`` still names our group: one of our processes is alive in it.

    Guards ``killpg`` against a process-group id the kernel has since reused.
    """
    if pgid is None:
        return False
    for info in known:
        if not info.is_alive():
            continue
        try:
            if os.getpgid(info.pid) == pgid:
                return True
        except (ProcessLookupError, PermissionError):
            continue
    return False


def terminate_tree(
    pgid: int | None,
    known: Iterable[ProcessInfo],
    *,
    grace_s: float,
    kill_wait_s: float = 5.0,
) -> TerminationReport:
    """Stop a server tree: SIGTERM, wait ``grace_s``, SIGKILL what is left, verify.

    ``pgid`` is the server's process group (its PID when launched with
    ``start_new_session=True``); ``known`` are the processes remembered from earlier
    snapshots, which finds orphans that left the group. Blocking: call it from a thread in
    async code.
    """
    procs: dict[tuple[int, float], ProcessInfo] = {(p.pid, p.create_time): p for p in known}
    if pgid is not None:
        for p in [*snapshot_tree(pgid), *group_members(pgid)]:
            procs.setdefault((p.pid, p.create_time), p)
    # Descendants of anything we know (children forked since the last snapshot).
    for p in list(procs.values()):
        if p.is_alive():
            for child in snapshot_tree(p.pid):
                procs.setdefault((child.pid, child.create_time), child)
    tree = list(procs.values())
    report = TerminationReport(signalled=survivors(tree))
    if not report.signalled:
        return report

    if _live_group(pgid, tree):
        assert pgid is not None
        signal_group(pgid, signal.SIGTERM)
    signal_each(tree, signal.SIGTERM)
    left = wait_gone(tree, grace_s)
    if left:
        report.escalated = True
        # Anything forked during the grace period belongs to the tree too.
        for p in list(left):
            for child in snapshot_tree(p.pid):
                if (child.pid, child.create_time) not in procs:
                    procs[(child.pid, child.create_time)] = child
                    left.append(child)
        if _live_group(pgid, left):
            assert pgid is not None
            signal_group(pgid, signal.SIGKILL)
        signal_each(left, signal.SIGKILL)
        left = wait_gone(left, kill_wait_s)
    report.survivors = left
    return report
