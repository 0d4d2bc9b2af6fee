"""Run history in SQLite: every run, failed starts included, survives the console.

A run is inserted the moment it starts (so a console killed right after still has it) and
updated in place as it becomes ready, fails, or gets a load result. Each write is one
transaction; the database runs in WAL mode so a reader (another ``vtc``) never blocks it.
Records are stored as their JSON, with a few columns for ordering and filtering.

A history file never stops the console. One that SQLite cannot read (truncated, junk, not
vtc's) is moved aside under a timestamped name, never deleted, and a fresh one is started;
:attr:`RunStore.notice` says so in one line. A single row that no longer reads as a run is
skipped and counted (``skipped_rows``); the row stays in the file. Records are read back
with :func:`tui.domain.flags.serve.stored_context`: they show what ran, whatever today's rules.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import platformdirs
from pydantic import ValidationError

from tui.domain.errors import BusyError, VtcError
from tui.domain.flags.serve import stored_context
from tui.domain.results import RunRecord
from tui.store.private import private_dir, private_file

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    status TEXT NOT NULL,
    model TEXT NOT NULL,
    record TEXT NOT NULL
);
"""
_COLUMNS = frozenset({"id", "created_at", "status", "model", "record"})
# SQLite's primary result codes for a file that is not (or no longer) a readable database.
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26
_SIDE_FILES = ("-wal", "-shm", "-journal")


RUNS_FILE = "runs.sqlite"
"""The run history's file name in a data directory."""
DEMO_RUNS_FILE = "demo-runs.sqlite"
"""The demo's run history (simulated runs never mix with real ones)."""


def history_file(data_dir: Path, demo: bool = False) -> Path:
    """The run history (the demo's when ``demo``) in ``data_dir``."""
    return data_dir / (DEMO_RUNS_FILE if demo else RUNS_FILE)


def default_data_dir() -> Path:
    """``$VTC_DATA_DIR`` if set, else the platform's user data dir for vtc."""
    override = os.environ.get("VTC_DATA_DIR")
    return Path(override) if override else Path(platformdirs.user_data_dir("vtc"))


T = TypeVar("T")


class HistoryError(VtcError):
    """The history file cannot be opened or written (a permission, a full disk...)."""


BUSY_TIMEOUT_S = 2.0
"""SQLite's busy timeout: how long one attempt waits for another process's lock."""
BUSY_ATTEMPTS = 3
"""Attempts of one write (or of opening) before it is refused: at most about
``BUSY_ATTEMPTS * BUSY_TIMEOUT_S`` (6 s) of waiting, off the console's loop."""


class HistoryBusy(HistoryError, BusyError):
    """Another process has held the history locked for longer than the stated bound."""


def _is_busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _busy(path: Path) -> HistoryBusy:
    waited = BUSY_ATTEMPTS * BUSY_TIMEOUT_S
    return HistoryBusy(
        f"the run history {path} is locked by another process (waited {waited:g} s: "
        f"{BUSY_ATTEMPTS} tries of {BUSY_TIMEOUT_S:g} s)",
        hint="another vtc or sqlite3 holds it; close that, or try again",
    )


class _Unreadable(Exception):
    """The file is there but is no readable vtc history (the message says why)."""


@dataclass(frozen=True)
class HistoryNotice:
    """What happened to the history when it was opened and read, for the console to show."""

    moved_to: Path | None = None
    reason: str = ""
    skipped_rows: int = 0

    def lines(self) -> list[str]:
        """One line per thing the operator should know (empty when all was well)."""
        out: list[str] = []
        if self.moved_to is not None:
            out.append(
                f"the run history could not be read ({self.reason}); it was moved to "
                f"{self.moved_to} and a fresh history started"
            )
        if self.skipped_rows:
            runs = "run" if self.skipped_rows == 1 else "runs"
            out.append(
                f"{self.skipped_rows} {runs} in the history could not be read and "
                "are not shown (they stay in the file)"
            )
        return out


class RunStore:
    """The board's persistence: add a run when it starts, update it as it changes."""

    def __init__(self, path: Path, *, now: Callable[[], datetime] | None = None) -> None:
        self.path = path
        self._now = now or (lambda: datetime.now(UTC))
        self._moved_to: Path | None = None
        self._reason = ""
        self.skipped_rows = 0
        """Rows the last :meth:`list` skipped because they no longer read as a run."""
        try:
            private_dir(path.parent)  # 0700: the runs' commands are the operator's alone
        except OSError as exc:
            raise HistoryError(f"cannot create {path.parent}: {exc.strerror or exc}") from None
        self._conn = self._open()

    @classmethod
    def in_data_dir(cls, name: str = RUNS_FILE) -> RunStore:
        """The store file ``name`` in :func:`default_data_dir`."""
        return cls(default_data_dir() / name)

    # -- opening -----------------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        try:
            return self._connect_checked()
        except _Unreadable as exc:
            self._reason = str(exc)
            self._moved_to = self._move_aside()
        try:
            return self._connect_checked()
        except _Unreadable as exc:  # a fresh file that SQLite cannot use: not ours to fix
            raise HistoryError(f"cannot start a fresh history at {self.path}: {exc}") from None

    def _connect_checked(self) -> sqlite3.Connection:
        try:
            private_file(self.path)  # created 0600 (SQLite gives its side files the same mode)
        except OSError as exc:
            raise HistoryError(f"cannot open {self.path}: {exc.strerror or exc}") from None
        try:
            conn = sqlite3.connect(
                str(self.path),
                isolation_level=None,
                check_same_thread=False,
                timeout=BUSY_TIMEOUT_S,
            )
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot open {self.path}: {exc}") from None
        try:
            self._retrying(lambda: _prepare(conn))
        except sqlite3.DatabaseError as exc:
            conn.close()
            if _is_corruption(exc):
                raise _Unreadable(str(exc)) from None
            raise HistoryError(f"cannot use {self.path}: {exc}") from None
        except _Unreadable:
            conn.close()
            raise
        return conn

    def _move_aside(self) -> Path:
        """Rename the unreadable file (and SQLite's side files) to a timestamped name."""
        stamp = self._now().strftime("%Y%m%dT%H%M%SZ")
        target = self.path.with_name(f"{self.path.stem}.corrupt-{stamp}{self.path.suffix}")
        n = 1
        while target.exists():
            n += 1
            target = self.path.with_name(f"{self.path.stem}.corrupt-{stamp}-{n}{self.path.suffix}")
        try:
            os.replace(self.path, target)
            for side in _SIDE_FILES:
                source = Path(str(self.path) + side)
                if source.exists():
                    os.replace(source, Path(str(target) + side))
        except OSError as exc:
            raise HistoryError(
                f"the run history {self.path} cannot be read ({self._reason}) and cannot be "
                f"moved aside: {exc.strerror or exc}"
            ) from None
        return target

    @property
    def notice(self) -> HistoryNotice:
        """What the console should tell the operator about this history (see module doc)."""
        return HistoryNotice(self._moved_to, self._reason, self.skipped_rows)

    # -- writing -----------------------------------------------------------------------------
    def _retrying(self, attempt: Callable[[], T]) -> T:
        """``attempt()``, again while another process holds the file locked (each try waits
        up to the busy timeout), then :class:`HistoryBusy` naming the file."""
        for n in range(BUSY_ATTEMPTS):
            try:
                return attempt()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
                if n + 1 < BUSY_ATTEMPTS:
                    time.sleep(0.05 * (n + 1))  # a short pause: the holder may be committing
        raise _busy(self.path)

    def _write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``body`` in one IMMEDIATE transaction, retried whole while the file is busy."""

        def attempt() -> T:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                result = body(self._conn)
                self._conn.execute("COMMIT")
            except BaseException:
                with suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
                raise
            return result

        try:
            return self._retrying(attempt)
        except HistoryBusy:
            raise
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot write the run history {self.path}: {exc}") from None

    def add(self, record: RunRecord) -> RunRecord:
        """Insert ``record``; returns it with its new ``id`` (and label ``#id`` if it had none).

        Ids come from SQLite's AUTOINCREMENT, never reused even after deletes, so a label
        taken from one is unique for the life of the history file.
        """

        def insert(conn: sqlite3.Connection) -> RunRecord:
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

        return self._write(insert)

    def update(self, record: RunRecord) -> None:
        """Replace the stored copy of ``record`` (which must have an ``id``)."""
        if record.id is None:
            raise ValueError("update() needs a record that was added (id is None)")
        self._write(
            lambda conn: conn.execute(
                "UPDATE runs SET status = ?, record = ? WHERE id = ?",
                (record.status.value, record.model_dump_json(), record.id),
            )
        )

    # -- reading -----------------------------------------------------------------------------
    def list(self, limit: int = 200) -> list[RunRecord]:
        """The newest ``limit`` runs that read back, oldest first (the board's order).

        Rows that do not read as a run are skipped and counted in :attr:`skipped_rows`.
        """
        try:
            rows = self._conn.execute(
                "SELECT id, record FROM runs ORDER BY id DESC LIMIT ?", (limit,)
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise HistoryError(f"cannot read the run history {self.path}: {exc}") from None
        records: list[RunRecord] = []
        skipped = 0
        context = stored_context()
        for row_id, text in reversed(rows):
            record = _read_row(row_id, text, context)
            if record is None:
                skipped += 1
            else:
                records.append(record)
        self.skipped_rows = skipped
        return records

    def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version``: it changes when *another* connection (another
        vtc process: a headless sweep, a second console) commits to the history."""
        try:
            row = self._conn.execute("PRAGMA data_version").fetchone()
        except sqlite3.DatabaseError as exc:
            raise HistoryError(f"cannot read the run history {self.path}: {exc}") from None
        return int(row[0])

    def delete(self, run_id: int) -> None:
        """Remove one run from the history."""
        self._write(lambda conn: conn.execute("DELETE FROM runs WHERE id = ?", (run_id,)))

    def close(self) -> None:
        """Close the connection."""
        with suppress(sqlite3.Error):
            self._conn.close()


def _read_row(row_id: object, text: object, context: dict[str, object]) -> RunRecord | None:
    if not isinstance(text, str | bytes) or not text:
        return None  # a row whose insert never completed, or not text at all
    try:
        record = RunRecord.model_validate_json(text, context=context)
    except (ValidationError, ValueError):
        return None
    if record.id is None and isinstance(row_id, int):
        record = record.model_copy(update={"id": row_id})
    return record


def _prepare(conn: sqlite3.Connection) -> None:
    _check(conn)  # before anything writes to the file: a bad one is moved as it was
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(_SCHEMA)


def _check(conn: sqlite3.Connection) -> None:
    """Raise :class:`_Unreadable` unless the file is a sound vtc history."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)").fetchall()}
    if columns and not columns >= _COLUMNS:  # no table yet: a new history
        raise _Unreadable(f"its runs table lacks {', '.join(sorted(_COLUMNS - columns))}")
    result = conn.execute("PRAGMA quick_check").fetchall()
    if not result or result[0][0] != "ok":
        detail = str(result[0][0]) if result else "no answer"
        raise _Unreadable(f"database disk image is malformed: {detail[:120]}")


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return (code & 0xFF) in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    text = str(exc)
    return "not a database" in text or "malformed" in text
