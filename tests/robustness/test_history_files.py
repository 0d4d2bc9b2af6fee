"""A damaged run history never stops ``vtc runs``, ``vtc --demo`` or the console.

Real SQLite files in the shapes a machine leaves them (cut short by a full disk or a killed
copy, overwritten with junk, one row of bad JSON, another program's database), read by the
real store, by ``vtc runs`` in a real process and by the console's own wiring. The bad file
is kept byte for byte under a timestamped name; nothing is deleted.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from fakes.store import (
    write_foreign_database,
    write_history,
    write_history_with_bad_rows,
    write_junk_history,
    write_truncated_history,
)

from tui.modes import ConsoleOptions, build_session
from tui.store.history import HistoryError, RunStore

# slow tier: each case runs the vtc command line or a console against a simulator process.
pytestmark = pytest.mark.slow

DAMAGE: dict[str, Callable[[Path], object]] = {
    "truncated": write_truncated_history,
    "junk": write_junk_history,
    "foreign": write_foreign_database,
}


def _vtc(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VTC_DATA_DIR": str(data_dir)}
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def _aside(data_dir: Path, stem: str) -> list[Path]:
    return sorted(data_dir.glob(f"{stem}.corrupt-*.sqlite"))


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_vtc_runs_on_a_damaged_history_moves_it_aside_and_answers(
    tmp_path: Path, damage: str
) -> None:
    DAMAGE[damage](tmp_path / "runs.sqlite")
    before = (tmp_path / "runs.sqlite").read_bytes()
    for n, args in enumerate((("runs",), ("runs", "--json"))):
        proc = _vtc(tmp_path, *args)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
        if n == 0:  # the first read moved it aside and says where, in one line
            line = proc.stderr.splitlines()[0]
            assert line.startswith("vtc: history: ") and "corrupt-" in line, proc.stderr
    assert json.loads(_vtc(tmp_path, "runs", "--json").stdout) == []
    (aside,) = _aside(tmp_path, "runs")  # moved once; the fresh file was sound after that
    assert aside.read_bytes() == before


def test_vtc_runs_skips_bad_rows_and_lists_the_rest(tmp_path: Path) -> None:
    bad = write_history_with_bad_rows(tmp_path / "runs.sqlite", good=2)
    proc = _vtc(tmp_path, "runs", "--json")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert [r["label"] for r in json.loads(proc.stdout)] == ["#1", "#2"]
    assert f"{bad} runs in the history could not be read" in proc.stderr, proc.stderr
    assert _aside(tmp_path, "runs") == []  # a bad row is no reason to move the file


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_the_demo_console_builds_on_a_damaged_history(tmp_path: Path, damage: str) -> None:
    DAMAGE[damage](tmp_path / "demo-runs.sqlite")
    session = build_session(ConsoleOptions(demo=True, data_dir=tmp_path, autostart=False))
    try:
        assert _aside(tmp_path, "demo-runs")
        (said,) = [n for n in session.info.notices if n.startswith("History:")]
        assert "moved to" in said and "\n" not in said  # one line for the console
    finally:
        session.abandon()
    store = RunStore(tmp_path / "demo-runs.sqlite")
    assert store.list() == [] and store.notice.moved_to is None
    store.close()
    proc = _vtc(tmp_path, "runs", "--demo")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr


def test_a_locked_history_is_not_taken_for_a_corrupt_one(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    write_history(path, 2)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
    holder = sqlite3.connect(path, timeout=0.1, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another program holds the whole file
    try:
        with pytest.raises(HistoryError) as err:
            RunStore(path)
        assert "locked" in str(err.value) and "\n" not in str(err.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert _aside(tmp_path, "runs") == []
    store = RunStore(path)
    assert [r.label for r in store.list()] == ["#1", "#2"]
    store.close()
