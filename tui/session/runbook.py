"""The run book: every run of the session, the current one, and their store writes.

Records change only through :func:`tui.domain.record.apply`, here, and every change is
written to the store in order by one writer thread (SQLite must not block the event loop).
A run is inserted, and the insert awaited, before its server is launched, so a console
killed right after still has it. Labels come from the store (``#<id>``: unique forever).

Runs other processes write (a headless ``vtc sweep``, a second console on the same data dir)
join the board without a restart: once :meth:`RunBook.begin` ran, the store's
``data_version`` is polled (in the writer thread, never on the event loop) and, when another
connection committed, the history is read again and its new or changed runs of other
sessions are merged in (this session's own runs are only ever written from here).

Every load is kept (issue 23): the first load of a server lands on its run; each further
load on the same server is stored as its own run (``load_of`` that run), which follows
its server's end and receives its own load's server-side latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from tui.domain.events import Exited, Failed
from tui.domain.record import LoadRecorded, RunEnded, RunEvent, TelemetryRecorded, apply
from tui.domain.results import RunRecord, RunStatus
from tui.session.port import RunUpdated

logger = logging.getLogger(__name__)


STORE_POLL_S = 2.0
"""How often the run book asks the store whether another process wrote to it."""


class RunStoreLike(Protocol):
    """What the run book needs of ``tui.store.history.RunStore``."""

    def add(self, record: RunRecord) -> RunRecord: ...
    def update(self, record: RunRecord) -> None: ...
    def list(self, limit: int = 200) -> list[RunRecord]: ...
    def data_version(self) -> int: ...
    def close(self) -> None: ...


class RunBook:
    """Runs in board order, the current run, and the store kept in step with them.

    ``history`` is what the store held when the session began (the mode reads it);
    ``on_update`` receives a :class:`RunUpdated` for every record created or changed, on
    the event loop.
    """

    def __init__(
        self,
        store: RunStoreLike,
        history: Collection[RunRecord],
        on_update: Callable[[RunUpdated], None],
        *,
        session_id: str | None = None,
    ) -> None:
        self.session_id = session_id
        """Stamped on every run this book opens (the board's "this session")."""
        self._store = store
        self._on_update = on_update
        self._runs: list[RunRecord] = list(history)
        self._current: RunRecord | None = None
        # One thread: writes happen in the order they were made, off the event loop.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vtc-runbook")
        self._last_write: Future[object] | None = None
        self._closed = False
        self._watch: asyncio.Task[None] | None = None
        self._version: int | None = None
        self._last_load: dict[int, int] = {}  # a server's run -> the run of its latest load
        self._written: set[int] = set()  # runs this book wrote: never merged from the store

    @property
    def runs(self) -> list[RunRecord]:
        """Every run on the board, oldest first."""
        return list(self._runs)

    @property
    def current(self) -> RunRecord | None:
        """The run whose server the session watches now (``None`` before the first)."""
        return self._current

    async def open(self, record: RunRecord) -> RunRecord:
        """Store ``record`` as a new run of this session (awaiting the insert), make it current."""
        if record.session is None and self.session_id is not None:
            record = record.model_copy(update={"session": self.session_id})
        stored = await asyncio.wrap_future(self._writer.submit(self._store.add, record))
        if stored.id is not None:
            self._written.add(stored.id)
        self._runs.append(stored)
        self._current = stored
        self._on_update(RunUpdated(stored))
        return stored

    async def resume_or_open(
        self, run_id: int | None, card: RunRecord, *, executable: str | None = None
    ) -> RunRecord:
        """Make the stored run ``run_id`` current again (a reattached server's own card),
        or, when it is not stored, open ``card`` for it (``executable``: where it runs)."""
        found = self._find(run_id) if run_id is not None else None
        if found is None:
            update = {"executable": executable} if executable else {}
            return await self.open(card.model_copy(update=update))
        self._current = found
        if found.id is not None:
            self._written.add(found.id)  # adopted: this book writes it from now on
        self._on_update(RunUpdated(found))
        return found

    async def record_load(self, run_id: int, event: LoadRecorded) -> RunRecord | None:
        """A load on run ``run_id``'s server: on that run if it holds none yet, else stored
        as a run of its own (nothing measured is ever overwritten). The run it is on, once it
        is in the store."""
        target = self._find(run_id)
        if target is None:
            return None
        if target.bench is None:
            changed = self.apply(event, run_id)
            # in the store before the caller goes on: a sweep journals the trial next, and a
            # kill then must not leave a journaled trial whose run holds no load
            await self.flush()
            return changed
        record = target.another_load()
        if record.sweep is not None:  # a sweep trial's probe: which load of its server
            earlier = sum(1 for r in self._runs if r.load_of == run_id)
            record = record.model_copy(
                update={"sweep": record.sweep.model_copy(update={"load": earlier + 2})}
            )
        if record.session is None and self.session_id is not None:
            record = record.model_copy(update={"session": self.session_id})
        record = apply(record, event)
        stored = await asyncio.wrap_future(self._writer.submit(self._store.add, record))
        self._runs.append(stored)
        if stored.id is not None:
            self._last_load[run_id] = stored.id
            self._written.add(stored.id)  # this book writes it: never merged from the store
        self._on_update(RunUpdated(stored))
        return stored

    def apply(self, event: RunEvent, run_id: int | None = None) -> RunRecord | None:
        """Fold ``event`` into the run ``run_id`` (default: the current run); store a change."""
        target = self._current if run_id is None else self._find(run_id)
        if target is None:
            return None
        if isinstance(event, TelemetryRecorded) and event.server_latency is not None:
            event = self._route_latency(target, event)
        changed = apply(target, event)
        if changed is not target:
            self._replace(changed)
        if isinstance(event, Exited | Failed | RunEnded) and target.id is not None:
            for load in self._loads_on(target.id):  # they share their server's end
                self._fold(load, event)
        return changed

    def _route_latency(self, target: RunRecord, event: TelemetryRecorded) -> TelemetryRecorded:
        """A further load's server-side latency goes to that load's own run."""
        load = self._last_load.get(target.id) if target.id is not None else None
        record = self._find(load) if load is not None else None
        if record is None:
            return event
        self._fold(
            record,
            TelemetryRecorded(
                server_latency=event.server_latency, load_cancelled=event.load_cancelled
            ),
        )
        return TelemetryRecorded(series=event.series)

    def _loads_on(self, run_id: int) -> list[RunRecord]:
        return [r for r in self._runs if r.load_of == run_id and r.status.live]

    def _fold(self, record: RunRecord, event: RunEvent) -> None:
        changed = apply(record, event)
        if changed is not record:
            self._replace(changed)

    def settle_orphans(self, keep: Collection[int]) -> int:
        """Mark stored runs still "live" as lost (their console is gone), except ``keep``.

        Returns how many were marked. A run another console still watches is in ``keep``.
        """
        lost = 0
        for record in self._runs:
            if record.load_of is not None and record.load_of in keep:
                continue  # a further load on a server still watched: it ends with it
            if record.status.live and record.id is not None and record.id not in keep:
                why = "its console ended without seeing the server stop"
                self._replace(apply(record, RunEnded(RunStatus.LOST, why)))
                lost += 1
        return lost

    def begin(self, keep: Collection[int], *, poll_s: float = STORE_POLL_S) -> int:
        """The session begins: :meth:`settle_orphans`, then follow what other processes
        write to the store (every ``poll_s``). Returns how many runs were marked lost."""
        lost = self.settle_orphans(keep)
        if self._watch is None and not self._closed:
            self._watch = asyncio.ensure_future(self._follow_store(poll_s))
        return lost

    async def refresh(self) -> int:
        """Merge what other processes wrote since the last look; how many runs changed."""
        if self._closed:
            return 0
        read = self._writer.submit(self._read_if_changed)
        records = await asyncio.wrap_future(read)
        if records is None:
            return 0
        changed = 0
        for record in records:
            if record.id is None or record.id in self._written or record == self._current:
                continue  # ours (opened, adopted or changed here): this book may be ahead
            if record.session is not None and record.session == self.session_id:
                continue
            known = self._find(record.id) if record.id is not None else None
            if known == record:
                continue
            if known is None:
                self._runs.append(record)
                self._runs.sort(key=lambda r: r.id if r.id is not None else 0)
            else:
                self._swap(record)
            changed += 1
            self._on_update(RunUpdated(record))
        return changed

    def _read_if_changed(self) -> list[RunRecord] | None:
        """In the writer thread: the history when another connection committed, else None."""
        version = self._store.data_version()
        if version == self._version:
            return None
        self._version = version  # the first look lists too: runs written since the mode read
        return self._store.list()

    async def _follow_store(self, poll_s: float) -> None:
        while not self._closed:
            try:
                await self.refresh()
            except Exception:  # a busy or vanished file: the next look may succeed
                logger.warning("cannot read the run history for other processes' runs")
            await asyncio.sleep(poll_s)

    def end_now(self, event: RunEnded) -> None:
        """Last resort once the event loop is gone (a crash): end the current run, in place.

        Writes synchronously after the pending writes, so the history never says READY
        for a server the console is about to kill.
        """
        record = self._current
        if record is None or self._closed:
            return
        loads = self._loads_on(record.id) if record.id is not None else []
        for each in (record, *loads):  # its further loads end with their server
            changed = apply(each, event)
            if changed is each:
                continue
            self._swap(changed)
            with contextlib.suppress(Exception):  # the crash path: never raise from here
                if self._last_write is not None:
                    self._last_write.result(timeout=5)
                self._store.update(changed)

    async def flush(self) -> None:
        """Wait until every write made so far is in the store."""
        last = self._last_write
        if last is not None:
            await asyncio.wrap_future(last)

    async def close(self) -> None:
        """Flush, then close the store (idempotent)."""
        if self._closed:
            return
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        await self.flush()
        self._closed = True
        self._writer.submit(self._store.close)
        self._writer.shutdown(wait=False)

    def _find(self, run_id: int) -> RunRecord | None:
        return next((r for r in self._runs if r.id == run_id), None)

    def _swap(self, record: RunRecord) -> None:
        self._runs = [record if r.id == record.id else r for r in self._runs]
        if self._current is not None and self._current.id == record.id:
            self._current = record

    def _replace(self, record: RunRecord) -> None:
        if record.id is not None:
            self._written.add(record.id)
        self._swap(record)
        if not self._closed:
            self._last_write = self._writer.submit(self._write, record)
        self._on_update(RunUpdated(record))

    def _write(self, record: RunRecord) -> None:
        try:
            self._store.update(record)
        except Exception:  # a failed write must not stop later ones; the board keeps it
            logger.exception("cannot store run %s", record.label)
