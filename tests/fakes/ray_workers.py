"""Stand-ins for a cluster sweep's Ray parts, for the rules that need no cluster.

:class:`FakeWorker` answers like the mode's ``TrialHost`` actor (``method.remote(...)``
returns an awaitable, as a Ray object ref is), or never answers the methods named in
``hang`` (a hung worker); :class:`FakeGroups` makes placement groups that are ready at once
while the fake cluster has room and wait otherwise, until :meth:`FakeGroups.free` makes
room. ``ray.kill`` and ``remove_placement_group`` are patched by :func:`patch_ray` to record
what was killed and removed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest

from tui.domain.results import BenchResult
from tui.domain.sweep.outcome import Placement
from tui.tune.lanes import BenchRun, StartResult
from tui.tune.ray_lane import HostReply


class _Method:
    def __init__(self, call: Callable[..., Coroutine[Any, Any, Any]]) -> None:
        self._call = call

    def remote(self, *args: Any) -> asyncio.Future[Any]:
        return asyncio.ensure_future(self._call(*args))

    def options(self, **_: Any) -> _Method:
        return self


class _Stream:
    def __init__(self, lines: Callable[[], AsyncIterator[Any]]) -> None:
        self._lines = lines

    def remote(self) -> AsyncIterator[Any]:
        return self._lines()

    def options(self, **_: Any) -> _Stream:
        return self


@dataclass(eq=False)
class FakeWorker:
    """A worker on ``node``: each method answers at once, or never (``hang``)."""

    node: str
    hang: frozenset[str] = frozenset()
    calls: list[str] = field(default_factory=list)

    def __getattr__(self, name: str) -> _Method | _Stream:
        if name.startswith("_"):
            raise AttributeError(name)

        async def call(*args: Any) -> Any:
            self.calls.append(name)
            if name in self.hang:
                await asyncio.Event().wait()  # never answers
            return await getattr(self, f"_{name}")(*args)

        if name == "watch":
            return _Stream(self._watch)
        return _Method(call)

    async def _watch(self) -> AsyncIterator[Any]:
        if False:  # a stream with no lines: it ends with the worker
            yield None

    async def _open(self) -> Placement:
        return Placement(node=self.node, gpu_ids=["0"])

    async def _start(self, *_: Any) -> HostReply:
        return HostReply(start=StartResult(True, kv_tokens=1000))

    async def _bench(self, load: Any, *_: Any) -> HostReply:
        result = BenchResult(
            completed=load.num_prompts, request_throughput=10.0, output_throughput=160.0
        )
        return HostReply(bench=BenchRun(result, None))

    async def _reset_prefix_cache(self) -> HostReply:
        return HostReply(reset=True)

    async def _stop(self) -> HostReply:
        return HostReply()

    async def _close(self) -> HostReply:
        return HostReply()

    async def _abort(self) -> None:
        return None

    async def _pids(self) -> dict[str, int]:
        return {}


@dataclass(eq=False)
class FakeGroup:
    """A placement group: ready once the fake cluster had room for it."""

    need: int
    placed: asyncio.Future[None]

    def ready(self) -> asyncio.Future[None]:
        return self.placed


@dataclass
class FakeGroups:
    """Makes groups on a cluster of ``gpus`` GPUs: ready while they fit, else waiting."""

    gpus: int
    made: list[FakeGroup] = field(default_factory=list)
    used: int = 0

    def __call__(self, need: int) -> FakeGroup:
        group = FakeGroup(need, asyncio.get_running_loop().create_future())
        self.made.append(group)
        self._place()
        return group

    def free(self, group: Any) -> None:
        """The group was removed: its GPUs back (a waiting group may be placed)."""
        if isinstance(group, FakeGroup) and group.placed.done() and not group.placed.cancelled():
            self.used -= group.need
        self.made = [g for g in self.made if g is not group]
        self._place()

    def _place(self) -> None:
        for group in self.made:
            if not group.placed.done() and self.used + group.need <= self.gpus:
                self.used += group.need
                group.placed.set_result(None)


@dataclass
class Killed:
    """What the head killed and removed."""

    actors: list[Any] = field(default_factory=list)
    groups: list[Any] = field(default_factory=list)


def patch_ray(monkeypatch: pytest.MonkeyPatch, groups: FakeGroups) -> Killed:
    """``ray.kill`` and ``remove_placement_group`` as the pool calls them: recorded."""
    import tui.tune.ray_slots as slots

    killed = Killed()

    def kill(actor: Any, **_: Any) -> None:
        killed.actors.append(actor)

    def remove(group: Any) -> None:
        killed.groups.append(group)
        groups.free(group)

    monkeypatch.setattr(slots.ray, "kill", kill)
    monkeypatch.setattr(slots, "remove_placement_group", remove)
    return killed
