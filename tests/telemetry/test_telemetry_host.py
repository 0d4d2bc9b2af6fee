"""HostSource: host CPU/memory and a process tree's RSS, tolerant of vanishing processes."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

from tui.telemetry.host import HostSource, process_tree_usage

# A parent that starts one child and then sleeps: a two-process tree we own.
TREE = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.fixture
def tree() -> Iterator[tuple[subprocess.Popen[str], int]]:
    parent = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child_pid = int(parent.stdout.readline())
    try:
        yield parent, child_pid
    finally:
        for pid in (child_pid, parent.pid):
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()
        parent.wait(timeout=10)


def test_tree_rss_and_count(tree: tuple[subprocess.Popen[str], int]) -> None:
    parent, _child_pid = tree
    sample = HostSource(parent.pid, clock=lambda: 4.0).sample()
    assert sample.t == 4.0
    assert sample.server_processes == 2
    expected_floor = psutil.Process(parent.pid).memory_info().rss
    assert sample.server_rss is not None and sample.server_rss > expected_floor
    assert sample.memory_total == psutil.virtual_memory().total
    assert sample.memory_used is not None and 0 < sample.memory_used <= sample.memory_total
    assert sample.cpu_percent is not None and sample.cpu_percent >= 0


def test_vanished_root_gives_none(tree: tuple[subprocess.Popen[str], int]) -> None:
    parent, child_pid = tree
    source = HostSource(parent.pid)
    psutil.Process(child_pid).kill()
    parent.kill()
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10  # bounded wait for the reaped pid to disappear
    while psutil.pid_exists(parent.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    sample = source.sample()
    assert (sample.server_rss, sample.server_processes) == (None, None)
    assert sample.memory_total is not None  # the host part still reads


def test_no_server_pid() -> None:
    sample = HostSource(None).sample()
    assert sample.server_rss is None and sample.server_processes is None
    assert sample.memory_total is not None


def test_root_pid_getter_is_read_each_sample(tree: tuple[subprocess.Popen[str], int]) -> None:
    parent, _child_pid = tree
    current: list[int | None] = [None]
    source = HostSource(lambda: current[0])
    assert source.sample().server_processes is None
    current[0] = parent.pid
    assert source.sample().server_processes == 2


class FakeProcess:
    def __init__(self, pid: int, rss: int | None, children: list[FakeProcess] | None = None):
        self.pid, self.rss, self._children = pid, rss, children or []

    def children(self, recursive: bool = False) -> list[FakeProcess]:
        assert recursive
        return self._children

    def memory_info(self) -> Any:
        if self.rss is None:  # exited between listing and reading
            raise psutil.NoSuchProcess(self.pid)
        if self.rss < 0:
            raise psutil.AccessDenied(self.pid)
        return SimpleNamespace(rss=self.rss)


def fake_psutil(root: FakeProcess) -> Any:
    return SimpleNamespace(
        Process=lambda pid: root,
        NoSuchProcess=psutil.NoSuchProcess,
        AccessDenied=psutil.AccessDenied,
        ZombieProcess=psutil.ZombieProcess,
    )


def test_children_vanishing_mid_walk_are_skipped() -> None:
    root = FakeProcess(
        1, 1000, [FakeProcess(2, 200), FakeProcess(3, None), FakeProcess(4, -1), FakeProcess(5, 30)]
    )
    assert process_tree_usage(1, fake_psutil(root)) == (1230, 3)


def test_root_unreadable_gives_none() -> None:
    assert process_tree_usage(1, fake_psutil(FakeProcess(1, -1))) == (None, None)
