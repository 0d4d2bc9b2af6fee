"""Process-tree helpers against real (tiny, sleeping) Python processes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from tui.server.process import ProcessInfo, snapshot_tree, survivors, terminate_tree

# A parent that starts one child per mode and prints the child's PID, then sleeps.
# mode "same": child in the parent's group; "ignore": same, ignoring SIGTERM; "session":
# child in its own session (out of the group: only a remembered snapshot finds it later).
PARENT = r"""
import signal, subprocess, sys, time
SLEEP = "import signal, time\n{ign}\nwhile True: time.sleep(1)"
modes = sys.argv[1:]
if "parent-ignores" in modes:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
for mode in modes:
    if mode == "parent-ignores":
        continue
    ign = "signal.signal(signal.SIGTERM, signal.SIG_IGN)" if mode == "ignore" else ""
    child = subprocess.Popen([sys.executable, "-c", SLEEP.format(ign=ign)],
                             start_new_session=(mode == "session"))
    print(child.pid, flush=True)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


@pytest.fixture
def spawn() -> Iterator[list[subprocess.Popen[str]]]:
    """Parents started by a test; afterwards every process they made is killed and reaped."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        for info in _children.pop(proc.pid, []):
            if info.is_alive():
                _kill(info.pid)
        _kill(proc.pid)
        proc.wait(timeout=5)


_children: dict[int, list[ProcessInfo]] = {}


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _start(
    spawn: list[subprocess.Popen[str]], *modes: str
) -> tuple[subprocess.Popen[str], list[int]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", PARENT, *modes],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    spawn.append(proc)
    assert proc.stdout is not None
    pids = []
    for line in proc.stdout:
        if line.strip() == "ready":
            break
        pids.append(int(line))
    # Remembered for the fixture's cleanup, even if a test orphans them.
    _children[proc.pid] = [p for p in snapshot_tree(proc.pid) if p.pid in pids]
    return proc, pids


def _reap(proc: subprocess.Popen[str]) -> None:
    # The parent is the test's own child: reap it so its PID does not linger as a zombie.
    proc.wait(timeout=5)


def test_snapshot_has_the_root_and_its_children(spawn: list[subprocess.Popen[str]]) -> None:
    proc, children = _start(spawn, "same", "session")
    snap = snapshot_tree(proc.pid)
    assert snap[0].pid == proc.pid
    assert {p.pid for p in snap} == {proc.pid, *children}
    assert all(p.is_alive() for p in snap)


def test_snapshot_of_a_gone_pid_is_empty(spawn: list[subprocess.Popen[str]]) -> None:
    proc, _ = _start(spawn)
    proc.kill()
    _reap(proc)
    assert snapshot_tree(proc.pid) == []


def test_sigterm_is_enough_for_a_polite_tree(spawn: list[subprocess.Popen[str]]) -> None:
    proc, children = _start(spawn, "same", "same")
    known = snapshot_tree(proc.pid)
    report = terminate_tree(proc.pid, known, grace_s=5.0)
    _reap(proc)
    assert report.clean
    assert not report.escalated
    assert {p.pid for p in report.signalled} == {proc.pid, *children}
    assert survivors(known) == []


def test_escalates_to_sigkill_when_sigterm_is_ignored(spawn: list[subprocess.Popen[str]]) -> None:
    proc, children = _start(spawn, "parent-ignores", "ignore")
    known = snapshot_tree(proc.pid)
    assert {p.pid for p in known} == {proc.pid, *children}
    report = terminate_tree(proc.pid, known, grace_s=0.3)
    _reap(proc)
    assert report.escalated
    assert report.clean
    assert survivors(known) == []
    assert proc.returncode == -signal.SIGKILL


def test_orphan_outside_the_group_is_found_through_the_snapshot(
    spawn: list[subprocess.Popen[str]],
) -> None:
    proc, [orphan] = _start(spawn, "session")
    known = snapshot_tree(proc.pid)  # taken while the parent lives
    proc.kill()  # the API server dies alone: its child is orphaned to PID 1
    _reap(proc)
    orphan_info = next(p for p in known if p.pid == orphan)
    assert orphan_info.is_alive()
    assert snapshot_tree(proc.pid) == []  # no longer anyone's descendant
    report = terminate_tree(proc.pid, known, grace_s=2.0)
    assert report.clean
    assert not orphan_info.is_alive()


def test_a_reused_pid_is_not_ours() -> None:
    me = psutil.Process()
    assert ProcessInfo(me.pid, me.create_time()).is_alive()
    assert not ProcessInfo(me.pid, me.create_time() - 1000.0).is_alive()
    assert ProcessInfo(me.pid, me.create_time() - 1000.0).process() is None


def test_a_zombie_counts_as_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    info = ProcessInfo(child.pid, psutil.Process(child.pid).create_time())
    deadline = time.monotonic() + 10
    while info.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not info.is_alive()  # exited but not reaped yet: a zombie
    child.wait(timeout=5)


def test_nothing_to_do_for_a_dead_tree() -> None:
    report = terminate_tree(None, [ProcessInfo(2**22 + 1, 0.0)], grace_s=0.1)
    assert report.clean
    assert report.signalled == []
