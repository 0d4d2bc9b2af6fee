"""What a trial needs of a server, one lane per GPU: start, benchmark, reset, stop.

A lane is where trials run one after another: a console session on one GPU (its launcher
pinned with ``CUDA_VISIBLE_DEVICES``), or the simulator's virtual clock. Several lanes run
trials in parallel, one per GPU.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from tui.domain.errors import VtcError
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import BenchResult, SweepTag
from tui.domain.sweep.cluster import ClusterChoice
from tui.domain.sweep.outcome import Placement
from tui.domain.sweep.spec import SweepSpec
from tui.domain.workload import LoadSpec


class LaneError(VtcError):
    """A lane could not measure (the load failed, the server went away)."""


class LaneInterrupted(LaneError):
    """Somebody else cut the trial short (a cancelled load, a server stopped under it):
    the sweep stops, and the trial runs again when it resumes."""


class LaneLost(LaneError):
    """The node or worker running the trial died mid-trial (a cluster sweep): the trial is
    marked lost with the node's name and run once more, on whatever node the cluster gives."""

    def __init__(self, message: str, *, node: str) -> None:
        super().__init__(message)
        self.node = node


class LaneRefused(LaneError):
    """The cluster as it is now can never hold the trial (no alive node has the GPUs it
    needs): it is refused before anything starts, with the reason, and not journaled (a
    resumed sweep asks again: the cluster may have grown)."""


@dataclass(frozen=True)
class StartResult:
    """How a trial's start went: up, or the diagnosis of why not."""

    ok: bool
    run_id: int | None = None
    diagnosis: str = ""
    diagnosis_kind: str | None = None
    kv_tokens: int | None = None
    placement: Placement | None = None  # where it started (a cluster lane; None: here)
    log_excerpt: str = ""  # the start's last log lines, where the log is on another node
    waited_s: float = 0.0  # waiting for a cluster to place it: not the trial's own time


@dataclass(frozen=True)
class BenchRun:
    """One load's result and the prefix-cache hit rate the server counted meanwhile (%)."""

    result: BenchResult
    prefix_hit_pct: float | None = None


class Lane(Protocol):
    """One place trials run, one at a time."""

    @property
    def name(self) -> str:
        """``gpu0``, ``console``, ``whatif``: shown beside each trial."""
        ...

    async def start(self, flags: ServeFlags, tag: SweepTag) -> StartResult:
        """Replace the lane's server by one with ``flags``; return once ready or failed."""
        ...

    async def bench(
        self, load: LoadSpec, *, model: str | None, goodput: Mapping[str, float]
    ) -> BenchRun:
        """Run ``load`` against the ready server (``model``: an adapter to address).

        ``goodput``: bench serve's ``--goodput`` thresholds (ms). Raises :class:`LaneError`.
        """
        ...

    async def reset_prefix_cache(self) -> bool:
        """``POST /reset_prefix_cache`` (a dev-mode endpoint); ``False`` if refused."""
        ...

    async def abort(self) -> None:
        """Cut the running load or start short (the sweep is being stopped)."""
        ...

    async def release(self) -> None:
        """The trial is over: let go of what only it needed (a cluster worker and its GPUs;
        a local lane keeps its server until the next trial replaces it)."""
        ...


class LaneCount(Protocol):
    """How many of a cluster's lanes count now: the cluster grows and shrinks mid-sweep."""

    def width(self) -> int:
        """How many trials the strategies hand out at once now."""
        ...

    def working(self) -> int:
        """How many lanes hold a running trial now (what the ETA divides by)."""
        ...


@dataclass
class ClusterRun:
    """A cluster's lanes for one sweep, how many of them count now, and how to let them
    and the cluster go."""

    lanes: list[Lane]
    close: Callable[[], Awaitable[None]]
    count: LaneCount | None = None


ClusterLanes = Callable[[SweepSpec, ClusterChoice, Callable[[str], None]], Awaitable[ClusterRun]]
"""Builds a sweep's lanes on a cluster (a mode's; ``on_progress`` gets the nodes' progress
lines). Raises ``VtcError`` (one line) when the cluster cannot hold a trial."""
