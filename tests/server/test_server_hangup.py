"""A real hang-up: ``vtc --demo`` on a pseudo-terminal whose other end goes away (what an SSH
drop or a killed tmux pane does). The console must exit by itself, promptly, and leave its
server running with a state file the next ``vtc`` can use, and its log still written (the
relay belongs to the server's session); ``vtc stop`` then ends it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import signal
import struct
import sys
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tui.server.adopted import stop_recorded_server
from tui.server.process import ProcessInfo, snapshot_tree
from tui.store.server_state import ServerStateFile, ServerStateRecord

# slow tier: a console on a pty hung up, as a process of its own.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="needs Linux ptys"),
]


def _drain(fd: int) -> None:
    """Read the console's output until the terminal goes away (a full pty would block it)."""
    with contextlib.suppress(OSError):
        while os.read(fd, 65536):
            pass


def _wait_ready(file: ServerStateFile, console: int, timeout: float) -> ServerStateRecord:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert os.waitpid(console, os.WNOHANG) == (0, 0), "the console exited early"
        with contextlib.suppress(Exception):
            record = file.read()
            if record is not None:
                health = httpx.get(record.base_url + "/health", timeout=1.0, trust_env=False)
                if health.status_code == 200:
                    return record
        time.sleep(0.1)
    raise AssertionError("the demo server never became ready")


def _wait_for(done: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "the log file stopped growing"
        time.sleep(0.05)


def _wait_exit(pid: int, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    return None


def test_a_hang_up_detaches_and_the_console_exits(tmp_path: Path) -> None:
    file = ServerStateFile.in_data_dir(tmp_path, demo=True)
    env = {**os.environ, "VTC_DATA_DIR": str(tmp_path), "TERM": "xterm-256color"}
    argv = [sys.executable, "-m", "tui.cli", "--demo", "--sim-speed", "50"]
    console, master = pty.fork()
    if console == 0:  # the child: the pty is its controlling terminal
        try:
            os.execve(sys.executable, argv, env)
        finally:
            os._exit(127)
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    reader = threading.Thread(target=_drain, args=(master,), daemon=True)
    reader.start()
    record: ServerStateRecord | None = None
    try:
        record = _wait_ready(file, console, timeout=60)
        assert record.console_pid == console
        os.close(master)  # the terminal goes away: the kernel sends the console SIGHUP
        master = -1
        code = _wait_exit(console, timeout=30)
        assert code == 0, f"the console did not exit cleanly after the hang-up: {code}"
        console = -1
        assert ProcessInfo(record.pid, record.create_time).is_alive()  # the server runs on
        left = file.read()
        assert left is not None and left.pid == record.pid and left.console_pid is None
        # Its log relay runs on too: what it serves now still reaches its log file.
        assert left.log_path is not None
        log = Path(left.log_path)
        size = log.stat().st_size
        body = {"model": left.flags["model"], "prompt": "Hello", "max_tokens": 4}
        response = httpx.post(
            record.base_url + "/v1/completions", json=body, timeout=60, trust_env=False
        )
        assert response.status_code == 200
        _wait_for(lambda: b"POST /v1/completions" in log.read_bytes()[size:], 30)
    finally:
        if master >= 0:
            os.close(master)
        if console > 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(console, signal.SIGKILL)
            os.waitpid(console, 0)
        if record is not None:
            tree = snapshot_tree(record.pid)
            outcome = stop_recorded_server(file, grace_s=5)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(record.pgid, signal.SIGKILL)  # in case the assertions above failed
            assert not [p for p in tree if p.is_alive()]
    assert outcome.stopped and not file.exists()
