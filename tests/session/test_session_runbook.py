"""The run book from a fake store: runs, labels, ordered writes off the loop."""

from __future__ import annotations

import asyncio
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


async def test_runs_another_process_writes_join_the_board_without_a_restart() -> None:
    """Issue 17: an open console showed 32 runs while 42 were stored."""
    store = MemoryRunStore()
    updates: list[RunUpdated] = []
    book = RunBook(store, [], updates.append, session_id="mine")
    assert await book.refresh() == 0  # the first look: nothing of others' yet
    mine = await book.open(record())
    other = store.write_from_elsewhere(record(session="a-sweep"))
    assert await book.refresh() == 1
    assert [r.id for r in book.runs] == [mine.id, other.id]
    assert updates[-1].record == other and book.current == mine  # ours stays current
    assert await book.refresh() == 0  # nothing new: the store is not even listed
    ended = other.model_copy(update={"status": RunStatus.STOPPED})
    store.update(ended)
    store.version += 1  # the other process's commit
    assert await book.refresh() == 1 and book.runs[-1].status is RunStatus.STOPPED
    await book.close()


async def test_the_real_history_sees_another_connections_commit(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    ours, theirs = RunStore(path), RunStore(path)
    book = RunBook(ours, ours.list(), lambda u: None, session_id="mine")
    try:
        book.begin(set(), poll_s=0.01)
        await book.open(record())
        written = theirs.add(record(session="headless-sweep"))
        for _ in range(2000):  # event-driven wait on the poller, bounded
            if any(r.id == written.id for r in book.runs):
                break
            await asyncio.sleep(0.01)
        assert [r.session for r in book.runs] == ["mine", "headless-sweep"]
    finally:
        await book.close()
        theirs.close()


async def test_every_load_on_one_server_is_kept_as_its_own_run() -> None:
    from tui.domain.events import Exited
    from tui.domain.record import LoadRecorded, TelemetryRecorded
    from tui.domain.results import BenchResult, TelemetryPeaks
    from tui.domain.telemetry import LatencyQuantiles, SeriesPoint, ServerLatency
    from tui.domain.workload import LoadSpec

    store = MemoryRunStore()
    book = RunBook(store, [], lambda u: None, session_id="s1")
    server = await book.open(record())
    book.apply(Ready(elapsed=2.0))
    assert server.id is not None
    loads = [
        LoadRecorded(
            BenchResult(completed=8, output_throughput=t), LoadSpec(num_prompts=n), TelemetryPeaks()
        )
        for t, n in ((100.0, 8), (90.0, 8), (50.0, 4))
    ]
    kept = [await book.record_load(server.id, load) for load in loads]
    assert [k.bench.output_throughput for k in kept if k and k.bench] == [100.0, 90.0, 50.0]
    first, second, third = kept
    assert first is not None and second is not None and third is not None
    assert first.id == server.id and second.load_of == third.load_of == server.id
    assert len({first.id, second.id, third.id}) == 3 and third.workload == LoadSpec(num_prompts=4)
    assert book.current is not None and book.current.id == server.id  # still the server's run
    # The last load's server-side latency goes to its own run; the series to the server's.
    latency = ServerLatency(window_s=5.0, ttft=LatencyQuantiles(p50=40.0, count=4))
    series = [SeriesPoint(t=1.0, kv_cache_usage=0.2)]
    book.apply(TelemetryRecorded(series=series, server_latency=latency), server.id)
    runs = {r.id: r for r in book.runs}
    assert runs[third.id].server_latency == latency and runs[server.id].server_latency is None
    assert runs[server.id].series == series and runs[third.id].series == []
    # The further loads end with their server, in the store too.
    book.apply(Exited(exit_code=0, requested=True))
    await book.flush()
    assert {store.records[i].status for i in (first.id, second.id, third.id)} == {RunStatus.STOPPED}
    assert {store.records[i].bench.output_throughput for i in (first.id, second.id, third.id)} == {  # type: ignore[union-attr]
        100.0,
        90.0,
        50.0,
    }
    assert all(store.records[i].session == "s1" for i in (second.id, third.id))


async def test_a_further_load_on_a_watched_server_is_not_an_orphan() -> None:
    history = [
        record(id=1, label="#1", status=RunStatus.READY),
        record(id=2, label="#2", status=RunStatus.READY, load_of=1),
        record(id=3, label="#3", status=RunStatus.READY, load_of=9),
    ]
    book = RunBook(MemoryRunStore(history), history, lambda u: None)
    assert book.settle_orphans({1}) == 1
    assert [r.status for r in book.runs] == [RunStatus.READY, RunStatus.READY, RunStatus.LOST]


async def test_a_run_this_book_writes_is_never_overwritten_from_the_store() -> None:
    """An adopted run (another session's id, written here from now on) keeps this book's
    copy even when the store's differs (a write still queued, another console's echo)."""
    adopted = record(id=1, label="#1", status=RunStatus.STARTING, session="the-first-console")
    store = MemoryRunStore([adopted])
    book = RunBook(store, [adopted], lambda u: None, session_id="mine")
    await book.resume_or_open(1, record())
    book.apply(Ready(elapsed=2.0))
    await book.flush()
    store.records[1] = adopted  # a stale copy in the store
    store.version += 1
    assert await book.refresh() == 0
    assert book.current is not None and book.current.status is RunStatus.READY
    await book.close()


class GatedStore(MemoryRunStore):
    """A store whose updates wait until the test lets them through (a slow disk)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.gate = threading.Event(), threading.Event()

    def update(self, record: RunRecord) -> None:
        self.entered.set()
        assert self.gate.wait(timeout=30), "never let through"
        super().update(record)


async def test_a_load_is_in_the_store_before_record_load_returns() -> None:
    # A sweep journals a trial as soon as its load returns; a kill right after must not leave
    # a journaled trial whose run holds no load (CI met it on real vLLM).
    from tui.domain.record import LoadRecorded
    from tui.domain.results import BenchResult, TelemetryPeaks
    from tui.domain.workload import LoadSpec

    store = GatedStore()
    book = RunBook(store, [], lambda u: None)
    server = await book.open(record())
    assert server.id is not None
    load = LoadRecorded(BenchResult(completed=8), LoadSpec(num_prompts=8), TelemetryPeaks())
    kept = asyncio.create_task(book.record_load(server.id, load))
    assert await asyncio.to_thread(store.entered.wait, 30)  # the write has begun
    await asyncio.sleep(0)
    assert not kept.done(), "returned while its write was still pending"
    store.gate.set()
    stored = await kept
    assert stored is not None and stored.bench is not None
    assert store.records[server.id].bench == stored.bench
    await book.close()
