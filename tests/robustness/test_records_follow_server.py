"""Records follow their server (issue 18, item 5).

After the console was hung up (it detaches, the server serves on) and ``vtc stop`` stopped
the server, the history still said the run was ``ready``. Now ``vtc stop`` closes the
record of the server it stops, and a run left ``ready`` whose server died while no
console watched is closed as ``lost``, with the time it was last seen, by the next reader
(``vtc runs``, the next console). Real console in tmux, real simulator, real history.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from fakes.waiting import until_blocking

from tui.domain.results import RunRecord, RunStatus
from tui.store.history import RunStore
from tui.store.server_state import ServerStateFile, ServerStateRecord

ROOT = Path(__file__).resolve().parents[2]
# slow tier: a console in tmux against simulator processes.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def _runs(data: Path) -> list[RunRecord]:
    path = data / "demo-runs.sqlite"
    if not path.exists():
        return []
    store = RunStore(path)
    try:
        return store.list()
    finally:
        store.close()


def _vtc(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "VTC_DATA_DIR": str(data)},
    )


@pytest.fixture
def detached(tmp_path: Path) -> Iterator[tuple[Path, ServerStateRecord]]:
    """A demo console in tmux, its server ready with a READY run, then the pane hung up."""
    data = tmp_path / "data"
    socket = f"i18-{uuid.uuid4().hex[:8]}"
    tmux = ["tmux", "-L", socket]
    command = (
        f"env -u COLUMNS -u LINES PYTHONPATH={ROOT} VTC_DATA_DIR={data} {sys.executable} "
        "-m tui.cli --demo "
        "--sim-speed 50"
    )
    subprocess.run(
        [
            *tmux,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "c",
            "-x",
            "120",
            "-y",
            "40",
            command,
        ],
        check=True,
        timeout=30,
    )
    state = ServerStateFile.in_data_dir(data, demo=True)
    record: ServerStateRecord | None = None
    try:
        until_blocking(lambda: state.read() is not None, "the demo server's state file", 120)
        until_blocking(
            lambda: any(r.status is RunStatus.READY for r in _runs(data)), "a READY run", 120
        )
        record = state.read()
        assert record is not None and record.console_pid is not None
        console = record.console_pid
        subprocess.run([*tmux, "kill-server"], timeout=30)  # the terminal goes: SIGHUP
        until_blocking(
            lambda: (
                not psutil.pid_exists(console)
                or psutil.Process(console).status() == psutil.STATUS_ZOMBIE
            ),
            "the console to detach and exit",
            60,
        )
        assert psutil.pid_exists(record.pid)  # the server serves on
        assert [r.status for r in _runs(data)] == [RunStatus.READY]
        yield data, record
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, timeout=30)
        if record is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(record.pgid, signal.SIGKILL)


def test_vtc_stop_closes_the_record_of_the_server_it_stops(
    detached: tuple[Path, ServerStateRecord],
) -> None:
    data, _record = detached
    stop = _vtc(data, "stop", "--demo", "--grace", "5")
    assert stop.returncode == 0, stop.stderr
    (run,) = _runs(data)
    assert run.status is RunStatus.STOPPED and "vtc stop" in run.ended_because
    board = _vtc(data, "runs", "--demo", "--format", "md").stdout
    assert "STOPPED" in board.upper() and "READY" not in board.upper(), board


def test_a_server_that_died_unwatched_is_closed_as_lost_with_its_last_sighting(
    detached: tuple[Path, ServerStateRecord],
) -> None:
    data, record = detached
    before = time.time()
    os.killpg(record.pgid, signal.SIGKILL)  # dies while no console watches
    until_blocking(
        lambda: (
            not psutil.pid_exists(record.pid)
            or psutil.Process(record.pid).status() == psutil.STATUS_ZOMBIE
        ),
        "the server's end",
        30,
    )
    runs = _vtc(data, "runs", "--demo")
    assert runs.returncode == 0, runs.stderr
    assert "closed as lost" in runs.stderr and runs.stderr.count("\n") == 1
    (run,) = _runs(data)
    assert run.status is RunStatus.LOST and run.last_seen is not None
    assert run.last_seen.timestamp() <= before + 1 and "last seen" in run.ended_because
    again = _vtc(data, "runs", "--demo")  # said once: the record is closed now
    assert "closed as lost" not in again.stderr
