"""The run book from a fake store: runs, labels, ordered writes off the loop."""

from __future__ import annotations

import threading
from pathlib import Path

from fakes.runs import MemoryRunStore

from tui.domain.events import Ready
from tui.domain.flags.serve import ServeFlags
from tui.domain.record import RunEnded
from tui.domain.results import RunRecord, RunStatus
from tui.session.port import RunUpdated
from tui.session.runbook import RunBook
from tui.store.history import RunStore


def record(**kw: object) -> RunRecord:
    return RunRecord(flags=ServeFlags(model="m"), **kw)  # type: ignore[arg-type]


async def test_a_run_is_stored_before_it_is_current_and_updates_are_written_in_order() -> None:
    store = MemoryRunStore()
    updates: list[RunUpdated] = []
    book = RunBook(store, [], updates.append)
    run = await book.open(record())
    assert run.id == 1 and run.label == "#1" and book.current == run
    assert store.records[1] == run  # the insert was awaited
    book.apply(Ready(elapsed=2.0))
    await book.flush()
    assert store.records[1].status is RunStatus.READY and store.writes == 1
    assert threading.current_thread().name not in store.threads  # never on the loop
    assert [u.record.status for u in updates] == [RunStatus.STARTING, RunStatus.READY]


async def test_a_failed_write_is_logged_and_later_writes_still_happen() -> None:
    store = MemoryRunStore()
    book = RunBook(store, [], lambda u: None)
    await book.open(record())
    store.fail_updates = True
    book.apply(Ready(elapsed=2.0))
    await book.flush()
    store.fail_updates = False
    book.apply(RunEnded(RunStatus.STOPPED))
    await book.flush()
    assert book.current is not None and book.current.status is RunStatus.STOPPED
    assert store.records[1].status is RunStatus.STOPPED


async def test_live_runs_of_a_dead_console_are_marked_lost_except_those_kept() -> None:
    history = [
        record(id=1, label="#1", status=RunStatus.READY),
        record(id=2, label="#2", status=RunStatus.STARTING),
        record(id=3, label="#3", status=RunStatus.READY),  # another console still watches it
        record(id=4, label="#4", status=RunStatus.FAILED),
    ]
    store = MemoryRunStore(history)
    book = RunBook(store, history, lambda u: None)
    assert book.settle_orphans({3}) == 2
    await book.flush()
    assert [r.status for r in book.runs] == [
        RunStatus.LOST,
        RunStatus.LOST,
        RunStatus.READY,
        RunStatus.FAILED,
    ]
    assert "console" in store.records[1].ended_because


async def test_a_crash_records_the_end_synchronously() -> None:
    store = MemoryRunStore()
    book = RunBook(store, [], lambda u: None)
    await book.open(record())
    book.apply(Ready(elapsed=1.0))
    book.end_now(RunEnded(RunStatus.STOPPED, "the console crashed"))
    assert store.records[1].status is RunStatus.STOPPED  # no await: the loop may be gone
    assert store.records[1].ended_because == "the console crashed"


async def test_the_206th_run_has_its_own_label_although_only_200_are_listed(
    tmp_path: Path,
) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    book = RunBook(store, store.list(), lambda u: None)
    labels = [(await book.open(record())).label for _ in range(206)]
    await book.close()
    assert len(set(labels)) == 206 and labels[-1] == "#206"
    again = RunStore(tmp_path / "runs.sqlite")
    book = RunBook(again, again.list(), lambda u: None)
    assert len(book.runs) == 200
    assert (await book.open(record())).label == "#207"  # never a second #201
    await book.close()
