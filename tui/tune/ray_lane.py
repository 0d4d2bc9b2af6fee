"""A lane on a Ray cluster: the trial's server and load run on a node, the head writes.

The head (the ``vtc sweep`` process) keeps the strategy, the journal and the board's run
store: one writer each. A :class:`RayLane` is one trial slot. Each trial asks the cluster
for a worker of its own (the mode's ``TrialHost`` actor) holding the GPUs one trial needs
(``tp x pp``; Ray picks the node and the GPU ids), forwards the trial's start, its loads
and its prefix-cache resets to it, and lets it go when the next trial starts (its server
stopped, its GPUs back to the cluster: a trial waiting for GPUs after a node was lost gets
them as soon as any trial ends). The worker launches the server pinned to
the GPUs Ray gave it and runs every load on the same node, so the network between head
and node never enters a timing; each reply carries the typed result and the runs the
worker recorded or changed since its last reply (startup, telemetry series, results),
which the head writes into its own store under its own ids. While a call runs, the lane
asks the worker what it is doing (async actors answer a second call meanwhile) and passes
that on as the sweep's progress line.

A node or worker dying mid-trial surfaces as one of Ray's actor errors: the lane raises
:class:`~tui.tune.lanes.LaneLost` naming the node and forgets the worker; the sweep marks
the trial lost and runs it once more, on a new worker wherever the cluster places it (a
dead node is not offered again; a killed worker's node may be). Ray's own retries stay off
(``max_restarts=0``): a restarted actor would not have the trial's server, so the retry is
the trial's, not the actor's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import ray
import ray.exceptions

from tui.domain.flags.serve import ServeFlags
from tui.domain.results import RunRecord, SweepTag
from tui.domain.sweep.outcome import Placement
from tui.domain.workload import LoadSpec
from tui.tune.lanes import BenchRun, LaneError, LaneInterrupted, LaneLost, StartResult
from tui.tune.session_lane import STOPPED_BEFORE_START

#: What Ray raises when the worker or its node is gone (the actor's process died, its node
#: was removed or lost, the object it was computing went with it).
LOST_ERRORS: tuple[type[BaseException], ...] = (
    ray.exceptions.RayActorError,
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.NodeDiedError,
    ray.exceptions.ObjectLostError,
)
PROGRESS_EVERY_S = 1.0


@dataclass(frozen=True)
class HostReply:
    """One call's answer from the node: the typed result, or why there is none, and every
    run the worker recorded or changed since its previous answer."""

    records: tuple[RunRecord, ...] = ()
    start: StartResult | None = None
    bench: BenchRun | None = None
    reset: bool = False
    error: str = ""  # the lane failed (a load that could not run): a LaneError on the head
    interrupted: bool = False  # cut short from outside (a stop): a LaneInterrupted


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


Spawn = Callable[[], Any]
"""A new worker (a Ray actor handle) holding one trial's GPUs, placed by the cluster."""


class RayLane:
    """One trial slot on the cluster: a worker per placement, the head's store written."""

    def __init__(
        self,
        spawn: Spawn,
        writer: HeadWriter,
        *,
        name: str,
        on_progress: Callable[[str], None] | None = None,
        poll_s: float = PROGRESS_EVERY_S,
    ) -> None:
        self._spawn = spawn
        self._writer = writer
        self._slot = name
        self._on_progress = on_progress
        self._poll_s = poll_s
        self._actor: Any = None
        self._placement: Placement | None = None
        self._ids: dict[int, int] = {}  # the worker's run ids -> the head's
        self._aborted = False

    @property
    def name(self) -> str:
        """Where the lane's trials run now (``node-a gpu 0,1``), its slot before placement."""
        return self._placement.describe() if self._placement is not None else self._slot

    @property
    def placement(self) -> Placement | None:
        """The node and GPUs of the lane's worker (``None`` until placed)."""
        return self._placement

    async def start(self, flags: ServeFlags, tag: SweepTag) -> StartResult:
        """Start the trial's server on a worker of its own (the previous trial's let go)."""
        if self._aborted:
            raise LaneInterrupted(STOPPED_BEFORE_START)
        await self.close()
        if self._aborted:  # stopped while the previous server stopped: nothing starts
            raise LaneInterrupted(STOPPED_BEFORE_START)
        actor = await self._worker()
        where = self._placement.describe() if self._placement is not None else ""
        reply = await self._call(actor.start.remote(flags, tag.model_copy(update={"where": where})))
        ids = await self._land(reply.records)
        assert reply.start is not None
        local = reply.start.run_id
        self._placement = reply.start.placement or self._placement  # with the run's facts
        return dataclasses.replace(
            reply.start,
            run_id=ids.get(local) if local is not None else None,
            placement=self._placement,
        )

    async def bench(
        self, load: LoadSpec, *, model: str | None, goodput: Mapping[str, float]
    ) -> BenchRun:
        """Run ``load`` on the worker's node against its server."""
        actor = await self._worker()
        reply = await self._call(actor.bench.remote(load, model, dict(goodput)))
        await self._land(reply.records)
        if reply.bench is None:
            raise LaneError("the node returned no result")
        return reply.bench

    async def reset_prefix_cache(self) -> bool:
        """``POST /reset_prefix_cache`` on the node."""
        actor = await self._worker()
        reply = await self._call(actor.reset_prefix_cache.remote())
        return reply.reset

    async def abort(self) -> None:
        """Cut the running load or start short; no further trial starts on this lane."""
        self._aborted = True
        if self._actor is not None:
            with contextlib.suppress(*LOST_ERRORS):
                await _result(self._actor.abort.remote())

    async def release(self) -> None:
        """The trial is over: its worker goes (server stopped, GPUs back to the cluster)."""
        await self.close()

    async def close(self) -> None:
        """Stop the worker's server, write its last run states, let the worker go."""
        actor, self._actor, self._placement = self._actor, None, None
        if actor is None:
            return
        try:
            reply: HostReply = await _result(actor.close.remote())
            await self._land(reply.records)
        except LOST_ERRORS:
            pass  # gone already: nothing more to write
        finally:
            ray.kill(actor, no_restart=True)

    async def _worker(self) -> Any:
        """The lane's worker, asked of the cluster (and waited for) when it has none."""
        if self._actor is not None:
            return self._actor
        actor = self._spawn()
        self._say("waiting for the cluster to place a worker with this trial's GPUs")
        try:
            placement: Placement = await _result(actor.open.remote())
        except LOST_ERRORS as exc:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
            raise LaneLost(
                f"the worker died before it was placed: {_cause(exc)}", node="unplaced"
            ) from None
        self._actor, self._placement, self._ids = actor, placement, {}
        return actor

    async def _call(self, ref: Any) -> HostReply:
        """The worker's answer to ``ref``, its progress passed on meanwhile."""
        waiting = asyncio.ensure_future(_result(ref))
        try:
            while True:
                done, _ = await asyncio.wait({waiting}, timeout=self._poll_s)
                if done:
                    reply: HostReply = waiting.result()
                    break
                await self._progress()
        except LOST_ERRORS as exc:
            raise self._lost(exc) from None
        finally:
            if not waiting.done():
                waiting.cancel()
        if reply.interrupted:
            raise LaneInterrupted(reply.error or "the trial was cut short on its node")
        if reply.error:
            raise LaneError(reply.error)
        return reply

    async def _progress(self) -> None:
        if self._actor is None or self._on_progress is None:
            return
        try:
            text = await asyncio.wait_for(_result(self._actor.progress.remote()), self._poll_s)
        except TimeoutError:
            return  # a busy node: the next poll asks again
        except LOST_ERRORS:
            return  # the call in flight says what happened
        self._say(str(text))

    def _say(self, text: str) -> None:
        if self._on_progress is not None and text:
            self._on_progress(f"{self.name}: {text}")

    def _lost(self, exc: BaseException) -> LaneLost:
        """The worker or its node died: forgotten, so the retry asks for a new one."""
        node = self._placement.node if self._placement is not None else "unplaced"
        actor, self._actor, self._placement = self._actor, None, None
        if actor is not None:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        return LaneLost(f"node {node} or its worker died mid-trial: {_cause(exc)}", node=node)

    async def _land(self, records: Sequence[RunRecord]) -> dict[int, int]:
        """Write the worker's runs into the head's store; its ids -> the head's.

        Parents first (a further load names its server's run), each new run added once, a
        known one updated; the server's pid is the node's, not the head's, so it is not
        kept (the head never signals or probes it).
        """
        for record in sorted(records, key=lambda r: r.id or 0):
            if record.id is None:
                continue
            parent = self._ids.get(record.load_of) if record.load_of is not None else None
            known = self._ids.get(record.id)
            copy = record.model_copy(update={"id": known, "load_of": parent, "server_pid": None})
            if known is None:
                stored = await self._writer.add(copy)
                assert stored.id is not None
                self._ids[record.id] = stored.id
            else:
                await self._writer.update(copy)
        return self._ids


async def _result(ref: Any) -> Any:
    """Await a Ray object ref (its value, or Ray's exception)."""
    awaitable: Awaitable[Any] = ref
    return await awaitable


def _cause(exc: BaseException) -> str:
    """Ray's error in a few words: its kind and the first line of what it said."""
    text = str(exc).strip().splitlines()
    first = text[0][:160] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
