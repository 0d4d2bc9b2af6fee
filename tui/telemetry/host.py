"""Host readings through psutil: CPU, memory, and the server's process tree.

The tree (``vllm serve``: API server, engine core, workers) changes under our feet, so a
process that vanishes or is not ours to read mid-walk is skipped, never an error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psutil

from tui.domain.telemetry import HostSample
from tui.telemetry.wsl import host_label, this_wsl


def process_tree(root_pid: int, ps: Any = psutil) -> tuple[int | None, tuple[int, ...]]:
    """(summed RSS bytes, pids) of ``root_pid`` and its descendants; ``(None, ())`` if the
    root process is gone or unreadable.

    RSS counts shared pages once per process, so the sum overstates the tree's real
    footprint; it is what ``ps``/``top`` show per process, which is what an operator
    cross-checks against. The pids mark the tree's processes in NVML's process lists.
    """
    gone = (ps.NoSuchProcess, ps.AccessDenied, ps.ZombieProcess)
    try:
        root = ps.Process(root_pid)
        members = [root, *root.children(recursive=True)]
        root_rss = root.memory_info().rss
    except gone:
        return None, ()
    total = int(root_rss)
    pids = [int(root.pid)]
    for proc in members[1:]:
        try:
            total += int(proc.memory_info().rss)
        except gone:
            continue  # exited (or was reaped) between listing and reading
        pids.append(int(proc.pid))
    return total, tuple(pids)


def process_tree_usage(root_pid: int, ps: Any = psutil) -> tuple[int | None, int | None]:
    """(summed RSS bytes, process count) of ``root_pid``'s tree; ``(None, None)`` if gone."""
    rss, pids = process_tree(root_pid, ps)
    return (None, None) if rss is None else (rss, len(pids))


class HostSource:
    """Host source. ``sample()`` is synchronous (run it in a thread).

    ``root_pid`` is the server's process: a pid, a function returning the current one (read
    at each sample, as servers come and go), or ``None`` for no server (tree fields ``None``).
    It is a plain attribute and may be reassigned. ``ps`` is the psutil module, injectable
    for tests. ``wsl``: ``"WSL2"``/``"WSL1"`` to label the host so, ``None`` to detect it.
    """

    def __init__(
        self,
        root_pid: int | Callable[[], int | None] | None = None,
        *,
        ps: Any = psutil,
        clock: Callable[[], float] = time.monotonic,
        wsl: str | None = None,
        hostname: str | None = None,
    ) -> None:
        self.root_pid = root_pid
        self._ps = ps
        self._clock = clock
        self.label = host_label(hostname, wsl if wsl is not None else this_wsl())
        # cpu_percent(None) measures since the previous call; the first call has no
        # baseline and returns 0.0, so make it here rather than in the first sample.
        self._cpu_percent()

    def sample(self) -> HostSample:
        """Read the host and the server tree. Never raises for vanished processes."""
        t = self._clock()
        cpu = self._cpu_percent()
        used = total = None
        try:
            mem = self._ps.virtual_memory()
            # total - available, as `free`/htop count "used": page cache is reclaimable.
            total = int(mem.total)
            used = total - int(mem.available)
        except (OSError, RuntimeError):  # RuntimeError: NotImplementedError on odd platforms
            pass
        rss: int | None = None
        pids: tuple[int, ...] = ()
        pid = self.root_pid() if callable(self.root_pid) else self.root_pid
        if pid is not None:
            rss, pids = process_tree(pid, self._ps)
        return HostSample(
            t=t,
            cpu_percent=cpu,
            memory_used=used,
            memory_total=total,
            server_rss=rss,
            server_processes=len(pids) if rss is not None else None,
            server_pids=pids,
            label=self.label,
        )

    def _cpu_percent(self) -> float | None:
        try:
            return float(self._ps.cpu_percent(interval=None))
        except (OSError, RuntimeError):  # RuntimeError: NotImplementedError on odd platforms
            return None
