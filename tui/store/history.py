"""Run history in SQLite: every run, failed starts included, survives the console.

A run is inserted the moment it starts (so a console killed right after still has it) and
updated in place as it becomes ready, fails, or gets a load result. Each write is one
transaction; the database runs in WAL mode so a reader (another ``vtc``) never blocks it.
Records are stored as their JSON, with a few columns for ordering and filtering.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import platformdirs

from tui.domain.results import RunRecord

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    status TEXT NOT NULL,
    model TEXT NOT NULL,
    record TEXT NOT NULL
);
"""


def default_data_dir() -> Path:
    """``$VTC_DATA_DIR`` if set, else the platform's user data dir for vtc."""
    override = os.environ.get("VTC_DATA_DIR")
    return Path(override) if override else Path(platformdirs.user_data_dir("vtc"))


class RunStore:
    """The board's persistence: add a run when it starts, update it as it changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)

    @classmethod
    def in_data_dir(cls, name: str = "runs.sqlite") -> RunStore:
        """The store file ``name`` in :func:`default_data_dir`."""
        return cls(default_data_dir() / name)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def add(self, record: RunRecord) -> RunRecord:
        """Insert ``record``; returns it with its new ``id`` (and label ``#id`` if it had none).

        Ids come from SQLite's AUTOINCREMENT, never reused even after deletes, so a label
        taken from one is unique for the life of the history file.
        """
        with self._tx() as conn:
            cur = conn.execute(
                "INSERT INTO runs (created_at, status, model, record) VALUES (?, ?, ?, '')",
                (record.created_at.isoformat(), record.status.value, record.flags.model),
            )
            assert cur.lastrowid is not None
            update: dict[str, object] = {"id": cur.lastrowid}
            if not record.label:
                update["label"] = f"#{cur.lastrowid}"
            stored = record.model_copy(update=update)
            conn.execute(
                "UPDATE runs SET record = ? WHERE id = ?",
                (stored.model_dump_json(), stored.id),
            )
        return stored

    def update(self, record: RunRecord) -> None:
        """Replace the stored copy of ``record`` (which must have an ``id``)."""
        if record.id is None:
            raise ValueError("update() needs a record that was added (id is None)")
        with self._tx() as conn:
            conn.execute(
                "UPDATE runs SET status = ?, record = ? WHERE id = ?",
                (record.status.value, record.model_dump_json(), record.id),
            )

    def list(self, limit: int = 200) -> list[RunRecord]:
        """The newest ``limit`` runs, oldest first (the board's order)."""
        rows = self._conn.execute(
            "SELECT record FROM runs ORDER BY id DESC LIMIT ?", (limit,)
        ).fetchall()
        return [RunRecord.model_validate_json(r[0]) for r in reversed(rows)]

    def delete(self, run_id: int) -> None:
        """Remove one run from the history."""
        with self._tx() as conn:
            conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()
