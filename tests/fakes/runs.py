"""An in-memory run store with the ``RunStore`` surface the run book uses."""

from __future__ import annotations

import threading

from tui.domain.results import RunRecord


class MemoryRunStore:
    """Keeps records in a dict; ids from a counter that never goes back (like AUTOINCREMENT).

    ``writes`` counts updates, ``threads`` the names of the threads that wrote (the run
    book must write off the event loop), ``fail_updates`` makes ``update`` raise.
    """

    def __init__(self, records: list[RunRecord] | None = None) -> None:
        self.records: dict[int, RunRecord] = {r.id: r for r in records or [] if r.id is not None}
        self._next = max(self.records, default=0) + 1
        self.writes = 0
        self.threads: set[str] = set()
        self.fail_updates = False
        self.closed = False

    def add(self, record: RunRecord) -> RunRecord:
        """Store with the next id; label ``#id`` unless it has one."""
        self.threads.add(threading.current_thread().name)
        stored = record.model_copy(
            update={"id": self._next, "label": record.label or f"#{self._next}"}
        )
        self.records[self._next] = stored
        self._next += 1
        return stored

    def update(self, record: RunRecord) -> None:
        """Replace the stored copy."""
        self.threads.add(threading.current_thread().name)
        if self.fail_updates:
            raise OSError("disk full")
        assert record.id is not None
        self.records[record.id] = record
        self.writes += 1

    def list(self, limit: int = 200) -> list[RunRecord]:
        """The newest ``limit`` runs, oldest first."""
        return [self.records[k] for k in sorted(self.records)][-limit:]

    def close(self) -> None:
        """Mark closed."""
        self.closed = True
