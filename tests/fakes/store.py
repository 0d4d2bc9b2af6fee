"""Store doubles: an in-memory run store, and real history/preset files in bad shapes.

``MemoryRunStore`` behaves like :class:`tui.store.history.RunStore` (ids never reused,
labels ``#<id>``, newest ``limit`` listed oldest first, a ``notice``) without a file, for
services tested from fakes. The ``write_*`` helpers make the damaged files the robustness
suite feeds the real classes: each is a file a real machine can end up with.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tui.domain.flags.serve import ServeFlags
from tui.domain.results import RunRecord
from tui.store.history import HistoryNotice, RunStore


class MemoryRunStore:
    """A :class:`RunStore` without a file (same id and label rules)."""

    def __init__(self, notice: HistoryNotice | None = None) -> None:
        self._runs: dict[int, RunRecord] = {}
        self._next_id = 1
        self._notice = notice or HistoryNotice()
        self.closed = False

    @property
    def notice(self) -> HistoryNotice:
        """What a real store would have said about its file."""
        return self._notice

    def add(self, record: RunRecord) -> RunRecord:
        """Store ``record`` with the next id (never reused) and, if unlabelled, ``#id``."""
        run_id = self._next_id
        self._next_id += 1
        update: dict[str, object] = {"id": run_id}
        if not record.label:
            update["label"] = f"#{run_id}"
        stored = record.model_copy(update=update)
        self._runs[run_id] = stored
        return stored

    def update(self, record: RunRecord) -> None:
        """Replace the stored copy (the record must have been added)."""
        if record.id is None:
            raise ValueError("update() needs a record that was added (id is None)")
        self._runs[record.id] = record

    def list(self, limit: int = 200) -> list[RunRecord]:
        """The newest ``limit`` runs, oldest first."""
        return [self._runs[i] for i in sorted(self._runs)][-limit:]

    def delete(self, run_id: int) -> None:
        """Forget one run."""
        self._runs.pop(run_id, None)

    def close(self) -> None:
        """Nothing to close; remembered for assertions."""
        self.closed = True


def write_history(path: Path, runs: int = 3, model: str = "m") -> list[RunRecord]:
    """A sound history file with ``runs`` runs (through the real store)."""
    store = RunStore(path)
    try:
        return [store.add(RunRecord(flags=ServeFlags(model=model))) for _ in range(runs)]
    finally:
        store.close()


def write_truncated_history(path: Path, runs: int = 60) -> int:
    """A history file cut in half, as a full disk or a killed copy leaves it; its old size."""
    write_history(path, runs, model="m" * 2000)  # long rows: the file spans many pages
    _checkpoint(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return len(data)


def write_junk_history(path: Path, size: int = 8192) -> bytes:
    """A "history" that is no database at all (the bytes it holds)."""
    junk = bytes((i * 131 + 7) % 256 for i in range(size))
    path.write_bytes(junk)
    return junk


def write_history_with_bad_rows(path: Path, good: int = 3) -> int:
    """``good`` sound runs plus rows that no longer read as runs; returns the bad count."""
    write_history(path, good)
    bad = [
        "{not json",
        json.dumps({"flags": {"model": "m"}, "status": "no-such-status"}),
        json.dumps([1, 2, 3]),
    ]
    with sqlite3.connect(path) as conn:
        for text in bad:
            conn.execute(
                "INSERT INTO runs (created_at, status, model, record) VALUES (?, ?, ?, ?)",
                ("2026-01-01T00:00:00+00:00", "ready", "m", text),
            )
    return len(bad)


def write_foreign_database(path: Path) -> None:
    """A sound SQLite file that is not a vtc history (its ``runs`` table is another's)."""
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE runs (name TEXT, lap INTEGER)")
        conn.execute("INSERT INTO runs VALUES ('x', 1)")


def _checkpoint(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")
