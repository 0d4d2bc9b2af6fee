"""``vtc stop`` finds the server it is asked about: plain ``vtc stop`` stops a demo server
left running when it is the only one recorded; ``--demo`` only ever the demo's."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tui.cli import main
from tui.store.server_state import ServerStateFile, ServerStateRecord

ARGV = [sys.executable, "-c", "import time; time.sleep(120)"]


@pytest.fixture
def left_running() -> Iterator[subprocess.Popen[bytes]]:
    """A process in its own session, as a server a console detached from."""
    proc = subprocess.Popen(ARGV, start_new_session=True)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _record(proc: subprocess.Popen[bytes], data_dir: Path, *, demo: bool) -> None:
    created = psutil.Process(proc.pid).create_time()
    record = ServerStateRecord(
        pid=proc.pid,
        pgid=proc.pid,
        create_time=created,
        base_url="http://127.0.0.1:8123",
        argv=ARGV,
        mode="demo" if demo else "local",
    )
    ServerStateFile.in_data_dir(data_dir, demo=demo).write(record)


def test_plain_stop_finds_the_demo_server_when_it_is_the_only_one(
    left_running: subprocess.Popen[bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("VTC_DATA_DIR", str(tmp_path))
    _record(left_running, tmp_path, demo=True)
    assert main(["stop", "--grace", "5"]) == 0
    out = capsys.readouterr().out
    assert "the demo's server" in out and f"pid {left_running.pid}" in out
    assert left_running.wait(timeout=10) is not None
    assert not ServerStateFile.in_data_dir(tmp_path, demo=True).exists()


def test_demo_flag_never_touches_the_consoles_server(
    left_running: subprocess.Popen[bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("VTC_DATA_DIR", str(tmp_path))
    _record(left_running, tmp_path, demo=False)
    assert main(["stop", "--demo"]) == 1
    assert "no server started by vtc is running" in capsys.readouterr().err
    assert left_running.poll() is None  # the console's server runs on
    assert main(["stop", "--grace", "5"]) == 0
    assert "the demo's server" not in capsys.readouterr().out
