"""The run history never stops the console: bad files are moved aside, bad rows skipped."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fakes.store import (
    MemoryRunStore,
    write_foreign_database,
    write_history,
    write_history_with_bad_rows,
    write_junk_history,
    write_truncated_history,
)

from tui.domain.flags.serve import ServeFlags
from tui.domain.results import RunRecord
from tui.store.history import HistoryError, RunStore

NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


def _store(path: Path) -> RunStore:
    return RunStore(path, now=lambda: NOW)


@pytest.mark.parametrize(
    "damage", [write_truncated_history, write_junk_history, write_foreign_database]
)
def test_an_unreadable_history_is_moved_aside_and_a_fresh_one_started(
    tmp_path: Path, damage: object
) -> None:
    path = tmp_path / "runs.sqlite"
    damage(path)  # type: ignore[operator]
    before = path.read_bytes()
    store = _store(path)
    aside = tmp_path / "runs.corrupt-20260304T050607Z.sqlite"
    assert store.notice.moved_to == aside
    assert aside.read_bytes() == before  # nothing lost: the very bytes, renamed
    (line,) = store.notice.lines()
    assert str(aside) in line and "fresh history" in line and "\n" not in line
    assert store.list() == []
    added = store.add(RunRecord(flags=ServeFlags(model="m")))
    assert added.label == "#1"
    store.close()
    reopened = _store(path)  # the fresh file is sound: nothing moved the second time
    assert reopened.notice.moved_to is None and [r.label for r in reopened.list()] == ["#1"]
    reopened.close()


def test_a_second_bad_file_in_the_same_second_gets_its_own_name(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    write_junk_history(path)
    _store(path).close()
    write_junk_history(path)
    second = _store(path)
    assert second.notice.moved_to == tmp_path / "runs.corrupt-20260304T050607Z-2.sqlite"
    assert (tmp_path / "runs.corrupt-20260304T050607Z.sqlite").exists()
    second.close()


def test_bad_rows_are_skipped_and_counted_and_stay_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    bad = write_history_with_bad_rows(path, good=3)
    store = _store(path)
    records = store.list()
    assert [r.label for r in records] == ["#1", "#2", "#3"]
    assert store.skipped_rows == bad == 3
    (line,) = store.notice.lines()
    assert line.startswith("3 runs in the history could not be read")
    store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (6,)


def test_stored_records_keep_what_ran_and_lose_their_secrets(tmp_path: Path) -> None:
    # an older vtc stored these flags as given: a doubled flag, max_model_len 0, a key
    path = tmp_path / "runs.sqlite"
    write_history(path, 1)
    record = {
        "id": 2,
        "created_at": "2026-01-01T00:00:00+00:00",
        "label": "#2",
        "status": "failed",
        "flags": {
            "model": "m",
            "max_model_len": 0,
            "extra_args": ["--max-model-len", "1024", "--api-key", "sk-old-123", "--seed", "1"],
        },
    }
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO runs (id, created_at, status, model, record) VALUES (2, ?, ?, ?, ?)",
            (record["created_at"], "failed", "m", json.dumps(record)),
        )
    store = _store(path)
    old = store.list()[-1]
    assert old.flags.max_model_len == 0
    assert old.flags.extra_args == ("--max-model-len", "1024", "--seed", "1")
    assert "sk-old-123" not in old.model_dump_json()
    assert store.skipped_rows == 0
    store.close()


def test_a_history_that_cannot_be_created_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(HistoryError) as err:
        RunStore(blocker / "runs.sqlite")
    assert "\n" not in str(err.value) and str(blocker) in str(err.value)


def test_a_folder_in_place_of_the_file_is_not_moved(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    path.mkdir()
    with pytest.raises(HistoryError):
        RunStore(path)
    assert path.is_dir()  # not ours to move: only SQLite's own "corrupt" verdicts move a file


def test_memory_store_follows_the_same_label_rules() -> None:
    store = MemoryRunStore()
    first = store.add(RunRecord(flags=ServeFlags(model="m")))
    store.delete(first.id or 0)
    second = store.add(RunRecord(flags=ServeFlags(model="m")))
    assert (first.label, second.label) == ("#1", "#2")
    assert store.list() == [second] and store.notice.lines() == []
