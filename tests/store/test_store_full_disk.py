"""A full disk at every writer vtc has: one line naming the file, and what was there kept.

The disk is faked full (``ENOSPC`` from the write that would take the new bytes): each
writer is called once to leave a first version, then again with the disk full.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakes.profiles import cpu_profile
from fakes.runs import served_run

from tui.domain.board.saved import SavedBoard
from tui.domain.errors import VtcError
from tui.domain.flags.serve import ServeFlags
from tui.domain.presets import Preset
from tui.domain.saved_form import SavedForm
from tui.domain.workload import LoadSpec
from tui.store import atomic
from tui.store.board_file import write_board
from tui.store.console_files import ConsoleFiles
from tui.store.form_file import write_form
from tui.store.history import HistoryError, RunStore
from tui.store.journal_file import JournalWriteError, append_records
from tui.store.lock import SweepLock
from tui.store.presets import save_user_preset
from tui.store.profiles import save_profile
from tui.store.report import write_report
from tui.store.server_state import ServerStateFile, ServerStateRecord

FULL = os.strerror(errno.ENOSPC)  # "No space left on device"


def _full(*_: Any, **__: Any) -> Any:
    raise OSError(errno.ENOSPC, FULL)


def _one_line(exc: BaseException) -> str:
    assert isinstance(exc, VtcError)
    text = exc.one_line()
    assert "\n" not in text and FULL in text
    return text


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def _record(pid: int) -> ServerStateRecord:
    return ServerStateRecord(pid=pid, pgid=pid, create_time=1.0, base_url="http://x:1", argv=[])


def _preset(n: int) -> Preset:
    return Preset(name="p", description=str(n), source="test", flags=ServeFlags(model="m"))


# each: (what, folder of the file, write once) -> the second write meets a full disk
WRITERS: dict[str, Callable[[Path, int], Path]] = {
    "report": lambda d, n: (write_report(d / "report.html", f"<p>{n}</p>"), d)[1],
    "preset": lambda d, n: save_user_preset(_preset(n), d).parent,
    "board file": lambda d, n: (write_board(d / "runs.board.json", SavedBoard(pinned=n)), d)[1],
    "export": lambda d, n: ConsoleFiles(d).write_export(served_run(n), "command").parent,
    "form file": lambda d, n: (
        write_form(d / "runs.form.json", SavedForm(ServeFlags(model=f"m{n}"), LoadSpec())),
        d,
    )[1],
    "server state file": lambda d, n: (ServerStateFile(d / "s.json").write(_record(n)), d)[1],
    "profile": lambda d, n: (save_profile(cpu_profile(d / f"model{n}"), d), d / "profiles")[1],
}


@pytest.mark.parametrize("what", list(WRITERS))
def test_a_whole_file_writer_keeps_the_old_file(
    what: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = WRITERS[what](tmp_path, 1)
    before = _files(folder)
    monkeypatch.setattr(atomic.os, "fsync", _full)  # the data cannot reach the disk
    with pytest.raises(OSError) as caught:
        WRITERS[what](tmp_path, 2)
    assert f"cannot write the {what}" in _one_line(caught.value)
    assert _files(folder) == before  # the old file whole, no temporary file left


def test_the_sweep_lock_refuses_in_one_line_and_is_not_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = tmp_path / "sweep.jsonl"
    monkeypatch.setattr(os, "pwrite", _full)
    lock = SweepLock.for_journal(journal)
    with pytest.raises(VtcError) as caught:
        lock.acquire()
    assert "cannot write the sweep's lock" in _one_line(caught.value)
    assert not lock.held
    monkeypatch.undo()
    with SweepLock.for_journal(journal) as again:  # nothing is left holding it
        assert again.held


def test_a_journal_keeps_its_whole_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sweep.jsonl"
    append_records(path, ['{"trial": 1}'], "sweep journal")
    monkeypatch.setattr(os, "write", _full)
    with pytest.raises(JournalWriteError) as caught:
        append_records(path, ['{"trial": 2}'], "sweep journal")
    assert "cannot write the sweep journal" in _one_line(caught.value)
    assert path.read_text() == '{"trial": 1}\n'


class _FullConnection:
    """SQLite's connection, but an INSERT meets a full disk (as SQLite reports one)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.lstrip().upper().startswith("INSERT"):
            raise sqlite3.OperationalError("database or disk is full")
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_the_run_history_keeps_its_runs(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    first = store.add(served_run(1))
    store._conn = _FullConnection(store._conn)  # type: ignore[assignment]  # vtc's own store
    with pytest.raises(HistoryError) as caught:
        store.add(served_run(2))
    text = caught.value.one_line()
    assert "\n" not in text and "database or disk is full" in text
    assert [r.id for r in RunStore(tmp_path / "runs.sqlite").list()] == [first.id]
