"""A lane on a Ray cluster: the trial's server and load run on a node, the head writes.

The head (the ``vtc sweep`` process) keeps the strategy, the journal and the board's run
store: one writer each. A :class:`RayLane` is one trial slot. Each trial takes a worker
holding the GPUs it needs (``tp x pp``) from the sweep's :class:`~tui.tune.ray_slots.Pool`:
a placement group of its own and the mode's ``TrialHost`` actor scheduled into it (Ray
picks the node and the GPU ids), or the worker a finished trial of the same size handed
on. The lane forwards the trial's start, its loads and its prefix-cache resets to the
worker, and when the trial is over stops its server and gives the worker back to the pool
(handed on, parked, or let go: a trial waiting for GPUs never waits on an idle worker). The
worker runs every load on its own node, so the network between head and node never enters
a timing; each reply carries the typed result and the runs the worker recorded or changed
since its last reply, which the head writes into its own store under its own ids. The
worker streams what it is doing (an actor generator, one line per change), passed on as the
sweep's progress.

Every call the head waits on has a deadline (:class:`~tui.tune.ray_slots.Deadlines`, in
elapsed time). A node or worker dying mid-trial surfaces as one of Ray's actor errors, a
hung one as its deadline passing: either way the lane raises
:class:`~tui.tune.lanes.LaneLost` naming the node and the reason, and lets the worker and
its GPUs go; the sweep marks the trial lost and runs it once more, wherever the cluster now
places it (or refuses it, when no node left can hold it). Ray's own retries stay off
(``max_restarts=0``): a restarted actor would not have the trial's server, so the retry is
the trial's, not the actor's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from tui.domain.flags.serve import ServeFlags
from tui.domain.results import RunRecord, SweepTag
from tui.domain.sweep.outcome import Placement
from tui.domain.workload import LoadSpec
from tui.tune.lanes import (
    BenchRun,
    LaneError,
    LaneInterrupted,
    LaneLost,
    StartResult,
)
from tui.tune.ray_slots import LOST_ERRORS, Deadlines, Pool, Slot, cause, result
from tui.tune.session_lane import STOPPED_BEFORE_START


class HostFailureKind(StrEnum):
    """Why a worker's call has no result."""

    FAILED = "failed"  # the lane failed (a load that could not run): a LaneError
    INTERRUPTED = "interrupted"  # cut short from outside (a stop): a LaneInterrupted


@dataclass(frozen=True)
class HostFailure:
    """A worker call that has no result: which kind, and what the node said."""

    kind: HostFailureKind
    message: str

    @classmethod
    def of(cls, exc: LaneError) -> HostFailure:
        """The failure a lane error on the node stands for."""
        kind = (
            HostFailureKind.INTERRUPTED
            if isinstance(exc, LaneInterrupted)
            else HostFailureKind.FAILED
        )
        return cls(kind, exc.one_line())

    def error(self) -> LaneError:
        """The same error, raised on the head."""
        if self.kind is HostFailureKind.INTERRUPTED:
            return LaneInterrupted(self.message or "the trial was cut short on its node")
        return LaneError(self.message)


@dataclass(frozen=True)
class HostReply:
    """One call's answer from the node: the typed result or the failure, and every run the
    worker recorded or changed since its previous answer."""

    records: tuple[RunRecord, ...] = ()
    start: StartResult | None = None
    bench: BenchRun | None = None
    reset: bool = False
    failure: HostFailure | None = None


class RunSink(Protocol):
    """The head's run store (``tui.store.history.RunStore``): the board's one writer."""

    def add(self, record: RunRecord) -> RunRecord: ...
    def update(self, record: RunRecord) -> None: ...


class HeadWriter:
    """Writes the nodes' runs into the head's store, one write at a time, off the loop."""

    def __init__(self, sink: RunSink) -> None:
        self._sink = sink
        self._lock = asyncio.Lock()

    async def add(self, record: RunRecord) -> RunRecord:
        """Store a new run; the stored copy (with the head's id)."""
        async with self._lock:
            return await asyncio.to_thread(self._sink.add, record)

    async def update(self, record: RunRecord) -> None:
        """Store a run's latest state."""
        async with self._lock:
            await asyncio.to_thread(self._sink.update, record)


class RayLane:
    """One trial slot on the cluster: the trial's worker (a :class:`Slot` the pool gives it),
    the head's store written, every call to the worker bounded by its deadline."""

    def __init__(self, pool: Pool, writer: HeadWriter, *, name: str) -> None:
        self._pool = pool
        self._writer = writer
        self._slot_name = name
        self._slot: Slot | None = None
        self._aborted = False

    @property
    def name(self) -> str:
        """Where the lane's trial runs now (``node-a gpu 0,1``), its slot before placement."""
        return self._slot.placement.describe() if self._slot is not None else self._slot_name

    @property
    def placement(self) -> Placement | None:
        """The node and GPUs of the lane's worker (``None`` until placed)."""
        return self._slot.placement if self._slot is not None else None

    async def start(self, flags: ServeFlags, tag: SweepTag) -> StartResult:
        """Take a worker holding the trial's GPUs, start its server there. Raises
        :class:`LaneRefused` / :class:`LaneLost` (see :class:`~tui.tune.ray_slots.Pool`)."""
        if self._aborted:
            raise LaneInterrupted(STOPPED_BEFORE_START)
        await self.release()  # a previous trial's worker, if its release never came
        need = trial_gpus(flags)
        asked = time.monotonic()
        self._say(f"reserving {need} GPU(s) on one node")
        slot = self._slot = await self._pool.take(need, self._say, lambda: self._aborted)
        waited = time.monotonic() - asked  # placement and the worker's opening
        where = tag.model_copy(update={"where": slot.placement.describe()})
        reply = await self._ask("start", slot.actor.start.remote(flags, where), self._d.start_s)
        ids = await self._land(slot, reply.records)
        assert reply.start is not None
        local = reply.start.run_id
        placement = reply.start.placement or slot.placement  # with the run's facts
        slot.placement = placement
        return dataclasses.replace(
            reply.start,
            run_id=ids.get(local) if local is not None else None,
            placement=placement,
            waited_s=waited,
        )

    async def bench(
        self, load: LoadSpec, *, model: str | None, goodput: Mapping[str, float]
    ) -> BenchRun:
        """Run ``load`` on the worker's node against its server."""
        slot = self._need()
        ref = slot.actor.bench.remote(load, model, dict(goodput))
        reply = await self._ask("bench", ref, self._d.bench_s(load))
        await self._land(slot, reply.records)
        if reply.bench is None:
            raise LaneError("the node returned no result")
        return reply.bench

    async def reset_prefix_cache(self) -> bool:
        """``POST /reset_prefix_cache`` on the node."""
        ref = self._need().actor.reset_prefix_cache.remote()
        reply = await self._ask("reset_prefix_cache", ref, self._d.reset_s)
        return reply.reset

    async def abort(self) -> None:
        """Cut the running load or start short; no further trial starts on this lane."""
        self._aborted = True
        slot = self._slot
        if slot is not None:
            try:
                await asyncio.wait_for(result(slot.actor.abort.remote()), self._d.abort_s)
            except TimeoutError:
                self._give_up(slot, f"did not abort within {self._d.abort_s:g} s: killed")
            except LOST_ERRORS:
                pass  # gone already: nothing runs there to cut short

    async def pids(self) -> dict[str, int]:
        """The worker's process id and its server's, on their node (empty without a
        worker): what an operator or a test looks for after a worker is killed."""
        if self._slot is None:
            return {}
        ref = self._slot.actor.pids.remote()
        found: dict[str, int] = await asyncio.wait_for(result(ref), self._d.reset_s)
        return found

    async def release(self) -> None:
        """The trial is over: its server stopped (its runs' last states written), the worker
        handed on or parked for the next trial, or let go (see
        :meth:`~tui.tune.ray_slots.Pool.give`)."""
        slot, self._slot = self._slot, None
        if slot is None:
            return
        try:
            reply: HostReply = await asyncio.wait_for(
                result(slot.actor.stop.remote()), self._d.stop_s
            )
        except TimeoutError:
            self._give_up(slot, f"did not stop its server within {self._d.stop_s:g} s: killed")
            return
        except LOST_ERRORS:
            self._pool.discard(slot)  # gone already: nothing more to write
            return
        await self._land(slot, reply.records)
        if reply.failure is not None or self._aborted:
            self._pool.discard(slot)  # a worker that could not stop its server is not reused
            return
        await self._pool.give(slot)

    async def close(self) -> None:
        """Stop the worker's server, write its last run states, let worker and GPUs go."""
        slot, self._slot = self._slot, None
        if slot is None:
            return
        try:
            reply: HostReply = await asyncio.wait_for(
                result(slot.actor.close.remote()), self._d.close_s
            )
            await self._land(slot, reply.records)
        except TimeoutError:
            self._say(f"the worker did not close within {self._d.close_s:g} s: killed")
        except LOST_ERRORS:
            pass  # gone already: nothing more to write
        finally:
            self._pool.discard(slot)

    @property
    def _d(self) -> Deadlines:
        return self._pool.deadlines

    def _need(self) -> Slot:
        if self._slot is None:
            raise LaneError("the trial has no worker (its start did not run)")
        return self._slot

    async def _ask(self, what: str, ref: Any, deadline_s: float) -> HostReply:
        """The worker's answer to ``ref`` within ``deadline_s`` (its progress streams
        meanwhile). Raises :class:`LaneLost` when the worker died or did not answer."""
        slot = self._need()
        try:
            reply: HostReply = await asyncio.wait_for(result(ref), deadline_s)
        except TimeoutError:
            raise self._lost(
                slot, f"its worker did not answer {what} within {deadline_s:g} s: given up"
            ) from None
        except LOST_ERRORS as exc:
            raise self._lost(slot, f"it or its worker died mid-trial: {cause(exc)}") from None
        if reply.failure is not None:
            raise reply.failure.error()
        return reply

    def _say(self, text: str) -> None:
        if text:
            self._pool.say_as(self.name, text)

    def _give_up(self, slot: Slot, why: str) -> None:
        """A worker that did not answer in time after its trial's result: killed (its
        warden stops its server), said on the progress line; the result stands."""
        if self._slot is slot:
            self._slot = None
        self._pool.say(slot, f"the worker {why}")
        self._pool.discard(slot)

    def _lost(self, slot: Slot, why: str) -> LaneLost:
        """The worker or its node died or hung: let go, so the retry asks for a new one."""
        node = slot.placement.node
        self._slot = None
        self._pool.discard(slot)
        return LaneLost(f"node {node}: {why}", node=node)

    async def _land(self, slot: Slot, records: Sequence[RunRecord]) -> dict[int, int]:
        """Write the worker's runs into the head's store; its ids -> the head's.

        Parents first (a further load names its server's run), each new run added once, a
        known one updated; the server's pid is the node's, not the head's, so it is not
        kept (the head never signals or probes it).
        """
        for record in sorted(records, key=lambda r: r.id or 0):
            if record.id is None:
                continue
            parent = slot.ids.get(record.load_of) if record.load_of is not None else None
            known = slot.ids.get(record.id)
            copy = record.model_copy(update={"id": known, "load_of": parent, "server_pid": None})
            if known is None:
                stored = await self._writer.add(copy)
                assert stored.id is not None
                slot.ids[record.id] = stored.id
            else:
                await self._writer.update(copy)
        return slot.ids


def trial_gpus(flags: ServeFlags) -> int:
    """The GPUs one trial's server takes: tensor x pipeline parallel."""
    return max(1, int(flags.tensor_parallel_size or 1)) * max(
        1, int(flags.pipeline_parallel_size or 1)
    )
