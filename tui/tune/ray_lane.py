"""A lane on a Ray cluster: the trial's server and load run on a node, the head writes.

The head (the ``vtc sweep`` process) keeps the strategy, the journal and the board's run
store: one writer each. A :class:`RayLane` is one trial slot. Each trial first reserves the
GPUs it needs (``tp x pp``) with a placement group of its own (one bundle, ``STRICT_PACK``:
vtc starts one ``vllm serve`` per trial, on one node), waited for in rounds with a deadline
(:class:`Placer`); then a worker of its own (the mode's ``TrialHost`` actor) is scheduled
into that group (``PlacementGroupSchedulingStrategy``; Ray picks the node and the GPU ids).
The lane forwards the trial's start, its loads and its prefix-cache resets to the worker,
and lets worker and group go when the trial is over (its server stopped, its GPUs back to
the cluster: a trial waiting for GPUs gets them as soon as any trial ends). The worker runs
every load on its own node, so the network between head and node never enters a timing;
each reply carries the typed result and the runs the worker recorded or changed since its
last reply, which the head writes into its own store under its own ids. The worker streams
what it is doing (an actor generator, one line per change) and the lane passes each line
on as the sweep's progress.

Placement never waits forever. Between rounds the cluster is read live (its alive nodes
now): a trial that no alive node can hold is refused with the reason
(:class:`~tui.tune.lanes.LaneRefused`); one that could be held but is not placed while no
trial of this sweep holds GPUs (so nothing of ours will free any) is given up after
:attr:`Placer.idle_deadline_s` as lost. Nodes that join are used as soon as Ray places a
waiting group on them; a node that leaves stops counting at the next round.

A node or worker dying mid-trial surfaces as one of Ray's actor errors: the lane raises
:class:`~tui.tune.lanes.LaneLost` naming the node and forgets the worker and its group; the
sweep marks the trial lost and runs it once more, wherever the cluster now places it (or
refuses it, when no node left can hold it). Ray's own retries stay off
(``max_restarts=0``): a restarted actor would not have the trial's server, so the retry is
the trial's, not the actor's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

import ray
import ray.exceptions
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group

from tui.domain.flags.serve import ServeFlags
from tui.domain.results import RunRecord, SweepTag
from tui.domain.sweep.outcome import Placement
from tui.domain.workload import LoadSpec
from tui.tune.gpus import refusal
from tui.tune.lanes import (
    BenchRun,
    LaneError,
    LaneInterrupted,
    LaneLost,
    LaneRefused,
    StartResult,
)
from tui.tune.session_lane import STOPPED_BEFORE_START

#: What Ray raises when the worker or its node is gone (the actor's process died, its node
#: was removed or lost, the object it was computing went with it).
LOST_ERRORS: tuple[type[BaseException], ...] = (
    ray.exceptions.RayActorError,
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.NodeDiedError,
    ray.exceptions.ObjectLostError,
)
#: A worker that died or hung while it opened.
OPEN_ERRORS: tuple[type[BaseException], ...] = (*LOST_ERRORS, TimeoutError)
PLACE_ROUND_S = 2.0  # how often a waiting placement reads the cluster again
IDLE_PLACEMENT_S = 300.0  # waiting with none of the sweep's trials placed: given up after
OPEN_DEADLINE_S = 180.0  # a placed worker builds its lane (a session, no server yet)


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


NodeGpus = Callable[[], Mapping[str, float]]
"""The cluster now: each alive node's id -> the GPUs it declares (read live, blocking)."""

Spawn = Callable[[PlacementGroup, int], Any]
"""A new worker (a Ray actor handle) taking the ``int`` GPUs of the trial's placement
group."""


@dataclass
class Placer:
    """Reserves each trial's GPUs (a placement group), never waiting forever; shared by a
    sweep's lanes, it knows how many of them hold GPUs now."""

    node_gpus: NodeGpus
    round_s: float = PLACE_ROUND_S
    idle_deadline_s: float = IDLE_PLACEMENT_S
    placed: int = 0

    async def reserve(
        self, need: int, say: Callable[[str], None], stopped: Callable[[], bool] = lambda: False
    ) -> PlacementGroup:
        """A ready placement group of one ``need``-GPU bundle on one node.

        Raises :class:`LaneRefused` when no alive node can hold it (before asking, and at
        every round: a node may leave meanwhile), :class:`LaneLost` when it is not placed
        within the idle deadline while no trial of this sweep holds GPUs,
        :class:`LaneInterrupted` when ``stopped()`` turns true meanwhile (a stop).
        """
        await self._check(need)
        group = placement_group([{"GPU": float(need)}], strategy="STRICT_PACK")
        ready = asyncio.ensure_future(_result(group.ready()))
        idle = 0.0
        said = False
        try:
            while True:
                done, _ = await asyncio.wait({ready}, timeout=self.round_s)
                if done:
                    ready.result()
                    self.placed += 1
                    return group
                if stopped():
                    raise LaneInterrupted(STOPPED_BEFORE_START)
                await self._check(need)
                idle = idle + self.round_s if self.placed == 0 else 0.0
                if idle >= self.idle_deadline_s:
                    raise LaneLost(
                        f"no node placed the trial's {need} GPU(s) within "
                        f"{self.idle_deadline_s:g} s while none of the sweep's trials held any",
                        node="unplaced",
                    )
                if not said:  # once: the running trials' progress goes on meanwhile
                    say(f"waiting for {need} free GPU(s) on one node")
                    said = True
        except BaseException:
            ready.cancel()
            remove_placement_group(group)
            raise

    def free(self, group: PlacementGroup) -> None:
        """The trial is over: its GPUs go back to the cluster."""
        self.placed = max(0, self.placed - 1)
        with contextlib.suppress(Exception):
            remove_placement_group(group)

    async def _check(self, need: int) -> None:
        why = refusal(need, await asyncio.to_thread(self.node_gpus))
        if why is not None:
            raise LaneRefused(why)


class RayLane:
    """One trial slot on the cluster: a group and a worker per trial, the head's store
    written."""

    def __init__(
        self,
        spawn: Spawn,
        writer: HeadWriter,
        placer: Placer,
        *,
        name: str,
        on_progress: Callable[[str], None] | None = None,
        open_deadline_s: float = OPEN_DEADLINE_S,
    ) -> None:
        self._spawn = spawn
        self._writer = writer
        self._placer = placer
        self._slot = name
        self._on_progress = on_progress
        self._open_s = open_deadline_s
        self._actor: Any = None
        self._group: PlacementGroup | None = None
        self._watch: asyncio.Task[None] | None = None
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
        """Reserve the trial's GPUs, start its server on a worker of its own (the previous
        trial's let go). Raises :class:`LaneRefused` / :class:`LaneLost` (see
        :class:`Placer`)."""
        if self._aborted:
            raise LaneInterrupted(STOPPED_BEFORE_START)
        await self.close()
        if self._aborted:  # stopped while the previous server stopped: nothing starts
            raise LaneInterrupted(STOPPED_BEFORE_START)
        asked = time.monotonic()
        actor = await self._open(trial_gpus(flags))
        waited = time.monotonic() - asked  # placement and the worker's opening
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
            waited_s=waited,
        )

    async def bench(
        self, load: LoadSpec, *, model: str | None, goodput: Mapping[str, float]
    ) -> BenchRun:
        """Run ``load`` on the worker's node against its server."""
        reply = await self._call(self._need().bench.remote(load, model, dict(goodput)))
        await self._land(reply.records)
        if reply.bench is None:
            raise LaneError("the node returned no result")
        return reply.bench

    async def reset_prefix_cache(self) -> bool:
        """``POST /reset_prefix_cache`` on the node."""
        reply = await self._call(self._need().reset_prefix_cache.remote())
        return reply.reset

    async def abort(self) -> None:
        """Cut the running load or start short; no further trial starts on this lane."""
        self._aborted = True
        if self._actor is not None:
            with contextlib.suppress(*LOST_ERRORS):
                await _result(self._actor.abort.remote())

    async def pids(self) -> dict[str, int]:
        """The worker's process id and its server's, on their node (empty without a
        worker): what an operator or a test looks for after a worker is killed."""
        if self._actor is None:
            return {}
        found: dict[str, int] = await _result(self._actor.pids.remote())
        return found

    async def release(self) -> None:
        """The trial is over: its worker goes (server stopped, GPUs back to the cluster)."""
        await self.close()

    async def close(self) -> None:
        """Stop the worker's server, write its last run states, let worker and group go
        (the group last: removing it kills the actors placed in it)."""
        actor, group = self._forget()
        try:
            if actor is not None:
                reply: HostReply = await _result(actor.close.remote())
                await self._land(reply.records)
        except LOST_ERRORS:
            pass  # gone already: nothing more to write
        finally:
            if actor is not None:
                ray.kill(actor, no_restart=True)
            if group is not None:
                self._placer.free(group)

    def _need(self) -> Any:
        if self._actor is None:
            raise LaneError("the trial has no worker (its start did not run)")
        return self._actor

    async def _open(self, need: int) -> Any:
        """A worker placed in a group holding ``need`` GPUs, its progress streamed."""
        self._say(f"reserving {need} GPU(s) on one node")
        group = await self._placer.reserve(need, self._say, lambda: self._aborted)
        actor = self._spawn(group, need)
        try:
            opening = _result(actor.open.remote())
            placement: Placement = await asyncio.wait_for(opening, self._open_s)
        except OPEN_ERRORS as exc:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
            self._placer.free(group)
            raise LaneLost(
                f"the worker died or hung before it was placed: {_cause(exc)}", node="unplaced"
            ) from None
        self._actor, self._group, self._placement, self._ids = actor, group, placement, {}
        self._watch = asyncio.ensure_future(self._stream(actor))
        return actor

    async def _stream(self, actor: Any) -> None:
        """The worker's progress lines, as it sends them, passed on (ends with it)."""
        with contextlib.suppress(*LOST_ERRORS, asyncio.CancelledError):
            async for ref in actor.watch.options(num_returns="streaming").remote():
                self._say(str(await ref))

    async def _call(self, ref: Any) -> HostReply:
        """The worker's answer to ``ref`` (its progress streams meanwhile)."""
        try:
            reply: HostReply = await _result(ref)
        except LOST_ERRORS as exc:
            raise self._lost(exc) from None
        if reply.failure is not None:
            raise reply.failure.error()
        return reply

    def _say(self, text: str) -> None:
        if self._on_progress is not None and text:
            self._on_progress(f"{self.name}: {text}")

    def _forget(self) -> tuple[Any, PlacementGroup | None]:
        """Let go of the worker's progress stream; the worker and its group, to end."""
        actor, self._actor, self._placement = self._actor, None, None
        group, self._group = self._group, None
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.cancel()
        return actor, group

    def _lost(self, exc: BaseException) -> LaneLost:
        """The worker or its node died: forgotten, so the retry asks for a new one."""
        node = self._placement.node if self._placement is not None else "unplaced"
        actor, group = self._forget()
        if actor is not None:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        if group is not None:
            self._placer.free(group)
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


def trial_gpus(flags: ServeFlags) -> int:
    """The GPUs one trial's server takes: tensor x pipeline parallel."""
    return max(1, int(flags.tensor_parallel_size or 1)) * max(
        1, int(flags.pipeline_parallel_size or 1)
    )


async def _result(ref: Any) -> Any:
    """Await a Ray object ref (its value, or Ray's exception)."""
    awaitable: Awaitable[Any] = ref
    return await awaitable


def _cause(exc: BaseException) -> str:
    """Ray's error in a few words: its kind and the first line of what it said."""
    text = str(exc).strip().splitlines()
    first = text[0][:160] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
