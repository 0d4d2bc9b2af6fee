"""The warden a cluster worker starts: once the worker's pipe closes (the worker gone,
however it went), every process the worker named is stopped with its group and the
worker's scratch folder removed. A plain script: no Ray needed to test it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tui.modes import ray_warden
from tui.server import children
from tui.server.spawn import spawn


def test_the_warden_stops_what_its_worker_named_once_the_worker_is_gone(tmp_path: Path) -> None:
    scratch = tmp_path / "trial-x"
    scratch.mkdir()
    (scratch / "runs.sqlite").write_text("", encoding="utf-8")
    server = subprocess.Popen(  # a server in a session of its own, as vtc starts them
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
    )
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        warden = subprocess.Popen(
            [sys.executable, ray_warden.__file__, str(scratch)], stdin=subprocess.PIPE
        )
        assert warden.stdin is not None
        warden.stdin.write(f"{server.pid}\nnot-a-pid\n".encode())
        warden.stdin.close()  # the worker is gone: its end of the pipe closed
        assert warden.wait(timeout=60) == 0
        assert server.wait(timeout=10) == -signal.SIGTERM
        assert not scratch.exists()
        assert bystander.poll() is None  # never named: left alone
    finally:
        for proc in (server, bystander):
            proc.kill()
            proc.wait()


def test_the_launcher_names_the_relay_and_the_server_the_moment_each_starts(
    tmp_path: Path,
) -> None:
    told: list[int] = []
    stop = children.listen(told.append)
    log = tmp_path / "server.log"
    log.write_text("# header\n", encoding="utf-8")
    try:
        spawned = spawn([sys.executable, "-c", "import time; time.sleep(600)"], {}, log)
    finally:
        stop()
    try:
        assert told == [spawned.relay.pid, spawned.proc.pid]  # as spawn() started them
    finally:
        spawned.proc.kill()
        spawned.proc.wait()
        os.close(spawned.tee_fd)
        if spawned.sync_fd is not None:
            os.close(spawned.sync_fd)
        spawned.relay.wait(timeout=30)


def test_a_workers_warden_is_told_each_child_and_stops_it_when_the_worker_ends(
    tmp_path: Path,
) -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")
    from tui.modes.ray_host import Warden

    scratch = tmp_path / "trial-y"
    scratch.mkdir()
    warden = Warden(scratch)
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
    )
    try:
        children.started(child.pid)  # what spawn() and the load runner call
        warden.end()  # the worker closing: the pipe closes, the warden stops what it named
        assert child.wait(timeout=30) == -signal.SIGTERM
        assert not scratch.exists()
    finally:
        child.kill()
        child.wait()


def test_the_warden_lets_go_of_children_that_ended_between_trials() -> None:
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        watched = {p.pid: os.pidfd_open(p.pid) for p in (ended, running)}
        ended.wait(timeout=30)
        ray_warden.prune(watched)
        assert list(watched) == [running.pid]  # the ended one's pidfd closed, the other kept
        os.close(watched[running.pid])
    finally:
        running.kill()
        running.wait()
