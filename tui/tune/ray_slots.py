"""A cluster sweep's workers and the GPUs they hold: reserved, handed on, let go, bounded.

A :class:`Slot` is one worker (the mode's ``TrialHost`` actor) placed in a placement group
of its own: one bundle of ``tp x pp`` GPUs on one node (``STRICT_PACK``: vtc starts one
``vllm serve`` per trial, on one node). Ray picks the node and the GPU ids. Starting a
worker costs a process and vtc's imports on its node, so a slot outlives its trial: once
the trial's server is stopped the slot is handed straight to a trial waiting for as many
GPUs, or parked for the sweep's next trial of that size; it is let go (worker closed, GPUs
back to the cluster) when a trial of another size needs the GPUs, when it died, and when
the sweep ends. A trial waiting for GPUs never waits on an idle slot of ours.

Nothing here waits forever. Every call the head makes to a worker has a deadline
(:class:`Deadlines`, counted in elapsed time by the event loop's monotonic clock), and
placement is waited for in rounds (:class:`Pool`): between rounds the cluster is read live
(its alive nodes now); a trial that no alive node can hold is refused with the reason
(:class:`~tui.tune.lanes.LaneRefused`); one that could be held but is not placed while no
trial of this sweep holds GPUs (so nothing of ours will free any) is given up as lost once
:attr:`Deadlines.idle_s` seconds have passed (elapsed time: a slow read of the cluster
does not stretch it). Nodes that join are used as soon as Ray places a waiting group on
them; a node that leaves stops counting at the next round.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import ray
import ray.exceptions
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group

from tui.domain.sweep.outcome import Placement
from tui.domain.workload import LoadSpec
from tui.tune.gpus import refusal
from tui.tune.lanes import LaneInterrupted, LaneLost, LaneRefused
from tui.tune.session_lane import STOPPED_BEFORE_START

#: What Ray raises when the worker or its node is gone (the actor's process died, its node
#: was removed or lost, the object it was computing went with it).
LOST_ERRORS: tuple[type[BaseException], ...] = (
    ray.exceptions.RayActorError,
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.NodeDiedError,
    ray.exceptions.ObjectLostError,
)
PLACE_ROUND_S = 2.0  # how often a waiting placement reads the cluster again
UNPLACED = "unplaced"  # the node a trial lost before placement is named by


@dataclass(frozen=True)
class Deadlines:
    """How long the head waits on each call to a worker (elapsed seconds), and what then.

    ``open`` (a placed worker builds its lane), ``start`` (the server up or failed:
    ``start_s`` is the server's own startup timeout plus :attr:`margin_s`), ``bench``
    (a load: :meth:`bench_s`), ``reset`` (the prefix cache emptied): when one passes, the
    worker is killed (its warden stops its server), its GPUs go back, and the trial is
    lost with the reason; the sweep runs it once more. ``stop`` and ``close`` (the trial's
    server stopped, the worker closed, after the trial's result is in): the result stands,
    the worker is killed. ``abort`` (the sweep stopping): the worker is killed.
    ``nodes``: one read of the alive nodes (the trial waiting for placement is lost).
    ``idle_s``: see :class:`Pool`.
    """

    open_s: float = 180.0
    start_s: float = 960.0
    reset_s: float = 60.0
    stop_s: float = 90.0
    close_s: float = 90.0
    abort_s: float = 30.0
    nodes_s: float = 60.0
    idle_s: float = 300.0
    margin_s: float = 120.0

    @classmethod
    def for_startup(cls, startup_timeout_s: float, *, open_s: float = 180.0) -> Deadlines:
        """The deadlines of a sweep whose servers may take ``startup_timeout_s`` to start."""
        return cls(open_s=open_s, start_s=startup_timeout_s + cls.margin_s)

    def bench_s(self, load: LoadSpec) -> float:
        """The longest a load can honestly take: its requests' arrival span (its duration,
        or prompts over rate), then every wave of requests (the concurrency cap's) waiting
        out its request timeout, plus :attr:`margin_s`."""
        sent = load.num_prompts + load.num_warmups
        waves = math.ceil(sent / load.max_concurrency) if load.max_concurrency else 1
        if load.duration_s is not None:
            span = load.duration_s
        elif math.isfinite(load.request_rate) and load.request_rate > 0:
            span = sent / load.request_rate
        else:
            span = 0.0
        return span + waves * load.request_timeout_s + self.margin_s


@dataclass
class Slot:
    """A worker placed with its GPUs (a placement group), kept from trial to trial."""

    actor: Any
    group: PlacementGroup
    need: int
    placement: Placement
    ids: dict[int, int] = field(default_factory=dict)  # the worker's run ids -> the head's
    watch: asyncio.Future[None] | None = None


NodeGpus = Callable[[], Mapping[str, float]]
"""The cluster now: each alive node's id -> the GPUs it declares (read live, blocking)."""

Spawn = Callable[[PlacementGroup, int], Any]
"""A new worker (a Ray actor handle) taking the ``int`` GPUs of the trial's placement
group."""

MakeGroup = Callable[[int], PlacementGroup]


def one_node_group(need: int) -> PlacementGroup:
    """A placement group of one ``need``-GPU bundle, all on one node."""
    return placement_group([{"GPU": float(need)}], strategy="STRICT_PACK")


@dataclass
class _Waiter:
    need: int
    handed: asyncio.Future[Slot]


class Pool:
    """The sweep's slots: reserves GPUs and opens workers, hands a freed slot on, parks it,
    lets it go; shared by a sweep's lanes, it knows how many of them hold GPUs now."""

    def __init__(
        self,
        spawn: Spawn,
        node_gpus: NodeGpus,
        *,
        deadlines: Deadlines | None = None,
        on_progress: Callable[[str], None] | None = None,
        make_group: MakeGroup = one_node_group,
        round_s: float = PLACE_ROUND_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._spawn = spawn
        self._node_gpus = node_gpus
        self.deadlines = deadlines or Deadlines()
        self._on_progress = on_progress
        self._make_group = make_group
        self._round_s = round_s
        self._clock = clock
        self.placed = 0
        """Slots a lane holds now (a trial on them): what will free GPUs for the others."""
        self.opened = 0
        """Workers started so far (a slot handed on or parked starts none)."""
        self._parked: list[Slot] = []
        self._waiters: list[_Waiter] = []

    async def take(
        self, need: int, say: Callable[[str], None], stopped: Callable[[], bool]
    ) -> Slot:
        """A slot of ``need`` GPUs: a parked one, one handed on by a trial that ended, or a
        new worker in a new placement group. Raises :class:`LaneRefused` when no alive node
        can hold it, :class:`LaneLost` when it is given up (see :class:`Deadlines`),
        :class:`LaneInterrupted` when ``stopped()`` turns true meanwhile (a stop)."""
        for slot in self._parked:
            if slot.need == need:
                self._parked.remove(slot)
                self.placed += 1
                return slot
        await self.let_parked_go()  # another size's idle GPUs would only block this one
        got = await self._reserve(need, say, stopped)
        if isinstance(got, Slot):
            return got
        return await self._open(got, need)

    async def give(self, slot: Slot) -> None:
        """A trial ended and its server stopped: the slot goes to a trial waiting for as
        many GPUs, or back to the cluster when a trial of another size waits, or parked."""
        self.placed = max(0, self.placed - 1)
        for waiter in self._waiters:
            if waiter.need == slot.need and not waiter.handed.done():
                self._waiters.remove(waiter)
                self.placed += 1
                waiter.handed.set_result(slot)
                return
        if self._waiters:
            await self.let_go(slot)
        else:
            self._parked.append(slot)

    def discard(self, slot: Slot) -> None:
        """The slot's worker died or was given up: killed, its GPUs back to the cluster."""
        self.placed = max(0, self.placed - 1)
        _end(slot)

    async def let_go(self, slot: Slot) -> None:
        """Close the slot's worker (bounded), then its GPUs go back to the cluster (the
        group last: removing it kills the actors placed in it)."""
        with contextlib.suppress(*LOST_ERRORS, TimeoutError):
            await asyncio.wait_for(result(slot.actor.close.remote()), self.deadlines.close_s)
        _end(slot)

    async def let_parked_go(self) -> None:
        """Every parked slot let go (the sweep's end, or GPUs another size needs)."""
        parked, self._parked = self._parked, []
        await asyncio.gather(*(self.let_go(slot) for slot in parked))

    def say(self, slot: Slot, text: str) -> None:
        """A progress line from the slot's node, named by where it runs."""
        self.say_as(slot.placement.describe(), text)

    def say_as(self, where: str, text: str) -> None:
        """A progress line named by ``where`` (a node and its GPUs, or a lane's slot)."""
        if self._on_progress is not None and text:
            self._on_progress(f"{where}: {text}")

    async def _reserve(
        self, need: int, say: Callable[[str], None], stopped: Callable[[], bool]
    ) -> PlacementGroup | Slot:
        """A ready group of ``need`` GPUs, or a slot a finished trial handed on meanwhile."""
        await self._check(need)
        group = self._make_group(need)
        ready = asyncio.ensure_future(result(group.ready()))
        waiter = _Waiter(need, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        idle_since: float | None = None
        said = False
        try:
            while True:
                await asyncio.wait({ready, waiter.handed}, timeout=self._round_s)
                if waiter.handed.done():
                    _remove(group)
                    return waiter.handed.result()
                if ready.done():
                    ready.result()
                    self.placed += 1
                    return group
                if stopped():
                    raise LaneInterrupted(STOPPED_BEFORE_START)
                await self._check(need)
                now = self._clock()
                idle_since = (idle_since or now) if self.placed == 0 else None
                if idle_since is not None and now - idle_since >= self.deadlines.idle_s:
                    raise LaneLost(
                        f"no node placed the trial's {need} GPU(s) within "
                        f"{self.deadlines.idle_s:g} s while none of the sweep's trials held any",
                        node=UNPLACED,
                    )
                if not said:  # once: the running trials' progress goes on meanwhile
                    say(f"waiting for {need} free GPU(s) on one node")
                    said = True
        except BaseException:
            ready.cancel()
            _remove(group)
            if waiter.handed.done() and not waiter.handed.cancelled():
                self.placed = max(0, self.placed - 1)  # handed on as this wait ended: kept
                self._parked.append(waiter.handed.result())
            raise
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    async def _open(self, group: PlacementGroup, need: int) -> Slot:
        """A worker placed in ``group``, opened within its deadline, its progress streamed."""
        actor = self._spawn(group, need)
        self.opened += 1
        try:
            opening = result(actor.open.remote())
            placement: Placement = await asyncio.wait_for(opening, self.deadlines.open_s)
        except TimeoutError:
            self._drop(actor, group)
            raise LaneLost(
                f"the worker did not open within {self.deadlines.open_s:g} s: given up",
                node=UNPLACED,
            ) from None
        except LOST_ERRORS as exc:
            self._drop(actor, group)
            raise LaneLost(f"the worker died as it opened: {cause(exc)}", node=UNPLACED) from None
        slot = Slot(actor, group, need, placement)
        slot.watch = asyncio.ensure_future(self._stream(slot))
        return slot

    def _drop(self, actor: Any, group: PlacementGroup) -> None:
        self.placed = max(0, self.placed - 1)
        with contextlib.suppress(Exception):
            ray.kill(actor, no_restart=True)
        _remove(group)

    async def _stream(self, slot: Slot) -> None:
        """The worker's progress lines, as it sends them, passed on (ends with it)."""
        with contextlib.suppress(*LOST_ERRORS, asyncio.CancelledError):
            async for ref in slot.actor.watch.options(num_returns="streaming").remote():
                self.say(slot, str(await ref))

    async def _check(self, need: int) -> None:
        """Refused when no alive node can hold ``need`` GPUs (read within its deadline)."""
        try:
            nodes = await asyncio.wait_for(
                asyncio.to_thread(self._node_gpus), self.deadlines.nodes_s
            )
        except TimeoutError:
            raise LaneLost(
                f"the cluster did not say which nodes are alive within "
                f"{self.deadlines.nodes_s:g} s",
                node=UNPLACED,
            ) from None
        why = refusal(need, nodes)
        if why is not None:
            raise LaneRefused(why)


def _end(slot: Slot) -> None:
    """The slot's worker killed and its group removed (its progress stream let go)."""
    if slot.watch is not None:
        slot.watch.cancel()
    with contextlib.suppress(Exception):
        ray.kill(slot.actor, no_restart=True)
    _remove(slot.group)


def _remove(group: PlacementGroup) -> None:
    with contextlib.suppress(Exception):
        remove_placement_group(group)


async def result(ref: Any) -> Any:
    """Await a Ray object ref (its value, or Ray's exception)."""
    awaitable: Awaitable[Any] = ref
    return await awaitable


def cause(exc: BaseException) -> str:
    """Ray's error in a few words: its kind and the first line of what it said."""
    text = str(exc).strip().splitlines()
    first = text[0][:160] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
