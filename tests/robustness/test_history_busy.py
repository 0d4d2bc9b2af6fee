"""A busy history waits, with a stated bound, and says so (issue 18, item 7).

A history locked by another process for longer than SQLite's busy timeout cancelled the
demo's automatic start with ``OperationalError: database is locked`` and no hint. Now each
write is retried (``BUSY_ATTEMPTS`` tries of ``BUSY_TIMEOUT_S``), then refused with one line
naming the file; the console adds the key that retries. Real SQLite locks held by another
process, a real console in tmux.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fakes.waiting import tmux_leave_field, until_blocking

from tui.domain.errors import BusyError, retry_line
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import RunRecord
from tui.store.history import BUSY_ATTEMPTS, BUSY_TIMEOUT_S, HistoryBusy, RunStore

# slow tier: the demo console and the vtc command line as processes of their own.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("held", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
"""


@contextlib.contextmanager
def held(path: Path) -> Iterator[Callable[[], None]]:
    """Another process holds ``path`` locked until the returned function is called."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"

    def release() -> None:
        if proc.poll() is None and proc.stdin is not None:
            proc.stdin.write("\n")
            proc.stdin.flush()
            proc.wait(timeout=30)

    try:
        yield release
    finally:
        release()


def _history(tmp_path: Path, name: str = "runs.sqlite") -> Path:
    path = tmp_path / name
    RunStore(path).close()  # created, in WAL mode, before another process locks it
    return path


def test_a_write_to_a_locked_history_is_refused_with_one_line_naming_it(tmp_path: Path) -> None:
    path = _history(tmp_path)
    store = RunStore(path)
    try:
        with held(path), pytest.raises(HistoryBusy) as refused:
            store.add(RunRecord(flags=ServeFlags(model="m")))
        line = refused.value.one_line()
        assert str(path) in line and "locked by another process" in line and "\n" not in line
        assert f"{BUSY_ATTEMPTS} tries of {BUSY_TIMEOUT_S:g} s" in line
        assert isinstance(refused.value, BusyError)
        assert retry_line(refused.value, "r").endswith("r retries")
        assert "OperationalError" not in line
        stored = store.add(RunRecord(flags=ServeFlags(model="m")))  # free again: it writes
        assert stored.id is not None
    finally:
        store.close()


def test_a_lock_released_within_the_bound_is_waited_out(tmp_path: Path) -> None:
    path = _history(tmp_path)
    store = RunStore(path)
    try:
        with held(path) as release:
            # Let go from another thread while the write waits; any moment inside the bound
            # works, so the test does not depend on the machine's speed.
            timer = threading.Timer(BUSY_TIMEOUT_S / 2, release)
            timer.start()
            try:
                stored = store.add(RunRecord(flags=ServeFlags(model="m")))
            finally:
                timer.join()
        assert stored.id is not None and [r.id for r in store.list()] == [stored.id]
    finally:
        store.close()


def _screen(socket: str) -> str:
    return subprocess.run(
        ["tmux", "-L", socket, "capture-pane", "-p", "-J", "-t", "c"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout


def _squeezed(socket: str) -> str:
    """The toasts' text (right of their border) without whitespace: wrapped lines read whole."""
    parts = [line.split("▌", 1)[1] for line in _screen(socket).splitlines() if "▌" in line]
    return "".join("".join(parts).split())


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_demo_start_on_a_busy_history_names_the_file_and_the_key(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = _history(data, "demo-runs.sqlite")
    socket = f"i18-{uuid.uuid4().hex[:8]}"
    command = (
        f"env -u COLUMNS -u LINES PYTHONPATH={ROOT} VTC_DATA_DIR={data} {sys.executable} "
        "-m tui.cli --demo "
        "--sim-speed 50"
    )
    tmux = ["tmux", "-L", socket]
    with held(path):
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
        try:
            until_blocking(lambda: "rretries" in _squeezed(socket), lambda: _screen(socket), 120)
            screen = _squeezed(socket)
            assert "lockedbyanotherprocess" in screen and "OperationalError" not in screen
            assert str(path).replace(" ", "") in screen
        except BaseException:
            subprocess.run([*tmux, "kill-server"], capture_output=True, timeout=30)
            raise
    try:
        tmux_leave_field(tmux, "c", lambda: _screen(socket))  # the Esc read alone, then the key
        subprocess.run([*tmux, "send-keys", "-t", "c", "r"], timeout=30)  # the key it named
        until_blocking(lambda: len(_runs(path)) >= 1, lambda: _screen(socket), 120)
    finally:
        subprocess.run([*tmux, "send-keys", "-t", "c", "q"], timeout=30)
        subprocess.run([*tmux, "kill-server"], capture_output=True, timeout=30)
        _stop_demo(data)


def _runs(path: Path) -> list[RunRecord]:
    store = RunStore(path)
    try:
        return store.list()
    finally:
        store.close()


def _stop_demo(data: Path) -> None:
    with contextlib.suppress(Exception):
        subprocess.run(
            [sys.executable, "-m", "tui.cli", "stop", "--demo", "--grace", "5"],
            env={**os.environ, "PYTHONPATH": str(ROOT), "VTC_DATA_DIR": str(data)},
            capture_output=True,
            timeout=60,
        )
