"""The Ray side of ``vtc sweep --ray``: join or start the cluster, its lanes, let them go.

With an address (``--ray ADDRESS``: ``auto``, ``host:6379``, ``ray://host:10001``) the head
joins that cluster, shipping vtc to its workers (:mod:`tui.modes.ray_ship`: its code, and
the packages a trial imports where a node lacks them, through Ray's ``runtime_env``; every
GPU node is checked before the sweep starts). Without one it starts a local instance, small
and quiet (its object store at :data:`LOCAL_OBJECT_STORE_BYTES`, no dashboard) with the GPUs
``--ray-gpus`` declares (a CPU machine declares them too: Ray hands out GPU ids it does not
check, which is how ``--demo`` and the tests run the whole path without a GPU). Each trial's
worker holds its ``tp x pp`` GPUs in a placement group and asks for no CPU (the server and
its load use the node's cores; Ray's CPU count would only cap how many trials a node takes).
The sweep's configuration is put in the object store once; each worker gets its reference.

The cluster is read live, never counted once (:class:`RayFleet`): every
:data:`~tui.tune.ray_slots.PLACE_ROUND_S` the alive nodes are read again, and the
strategies hand out as many trials at once as they hold now plus :data:`SPARE_LANES`
(trials that wait for the next free worker of their size), so a node that joins mid-sweep
widens the next batch and one that leaves narrows it; the ETA divides by the lanes that
hold a trial now, never by the spare ones. Each placement reads the alive nodes again too
(:class:`tui.tune.ray_slots.Pool`), so a node that left stops counting at once. A sweep
none of whose trials any alive node can hold is refused before anything starts; a single
trial too large for every node is refused when its turn comes, with the reason, while the
others run.

:func:`open_cluster` is the one way in and out (connect, lanes, close, disconnect), used by
``vtc sweep --ray`` and the console's sweep composer alike.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from tui.domain.results import RunStatus
from tui.domain.sweep.cluster import ClusterChoice
from tui.domain.sweep.spec import SweepSpec
from tui.modes.options import ConsoleOptions, SetupError
from tui.modes.ray_host import HostConfig, TrialHost
from tui.modes.ray_ship import code_env, shipped_env
from tui.store.history import RunStore, history_file
from tui.tune.gpus import Unplaceable, trials_at_once
from tui.tune.lanes import ClusterRun, Lane
from tui.tune.ray_lane import HeadWriter, RayLane
from tui.tune.ray_slots import PLACE_ROUND_S, Deadlines, Pool

LOCAL_OBJECT_STORE_BYTES = 100 * 1024 * 1024  # replies are small: a few runs' records
LOCAL_CPUS = 1  # the workers ask for none; Ray keeps this many idle workers ready
SPARE_LANES = 4  # trials waiting for a free worker beyond what the alive nodes hold now
MAX_LANES = 256  # the most trials at once, however large the cluster grows
OPEN_SHIPPED_S = 600.0  # a worker's first open on a node that joined later installs packages
LEFT_BY_A_KILLED_HEAD = "the sweep's head was killed while it ran; its trial runs again"


def connect(choice: ClusterChoice) -> None:
    """Join the cluster at ``choice.address``, or start a local instance (blocking)."""
    if ray.is_initialized():
        return
    try:
        if choice.address:
            ray.init(address=choice.address, runtime_env=code_env(), log_to_driver=False)
        else:
            ray.init(
                address="local",
                num_cpus=LOCAL_CPUS,
                num_gpus=choice.gpus,
                object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                include_dashboard=False,
                log_to_driver=False,
            )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = choice.address or "a local instance"
        raise SetupError(
            f"Ray: could not start or join {where}: {exc}", hint="is the cluster up (`ray status`)?"
        ) from exc


def disconnect() -> None:
    """Leave the cluster (a local instance stops with it)."""
    if ray.is_initialized():
        ray.shutdown()


def node_gpus() -> dict[str, float]:
    """Every alive node's GPUs now (its id -> how many the cluster declares; blocking)."""
    return {
        str(node["NodeID"]): float(node.get("Resources", {}).get("GPU", 0.0))
        for node in ray.nodes()
        if node.get("Alive")
    }


@dataclass
class RayFleet:
    """A sweep's lanes on the cluster and how many of them count now (it follows the
    alive nodes while the sweep runs: :meth:`follow`)."""

    spec: SweepSpec
    lanes: list[RayLane]
    pool: Pool
    at_once: int
    """The trials the alive nodes hold side by side, as last read (0: none fits now)."""
    _follower: asyncio.Task[None] | None = field(default=None, repr=False)

    def width(self) -> int:
        """How many trials the strategies hand out at once now."""
        return min(len(self.lanes), max(1, self.at_once + SPARE_LANES))

    def working(self) -> int:
        """The lanes holding a trial now (between trials: those the cluster holds)."""
        return self.pool.placed or max(1, self.at_once)

    def read(self, nodes: dict[str, float]) -> None:
        """The alive nodes now: how many trials they hold at once."""
        try:
            self.at_once = trials_at_once(nodes, self.spec)
        except Unplaceable:
            self.at_once = 0  # each trial is refused with the reason when its turn comes

    def follow(self) -> None:
        """Read the alive nodes every round while the sweep runs (in a thread, bounded)."""
        if self._follower is None:
            self._follower = asyncio.ensure_future(self._follow())

    async def close(self) -> None:
        """Stop following; every lane's worker and every parked one let go."""
        if self._follower is not None:
            self._follower.cancel()
        await asyncio.gather(*(lane.close() for lane in self.lanes), return_exceptions=True)
        await self.pool.let_parked_go()

    async def _follow(self) -> None:
        deadline = self.pool.deadlines.nodes_s
        while True:
            await asyncio.sleep(PLACE_ROUND_S)
            with contextlib.suppress(TimeoutError):  # a slow read: the next round asks again
                self.read(await asyncio.wait_for(asyncio.to_thread(node_gpus), deadline))


def ray_lanes(
    spec: SweepSpec,
    options: ConsoleOptions,
    choice: ClusterChoice,
    data_dir: Path,
    on_progress: Callable[[str], None],
    env: dict[str, Any] | None = None,
) -> RayFleet:
    """The sweep's lanes on the connected cluster, sharing one pool of workers and the
    head's store (the configuration put once).

    Raises :class:`tui.tune.gpus.Unplaceable` (one line) when no alive node can hold any
    trial of the spec. ``env``: what the workers' ``runtime_env`` adds to the job's (vtc's
    packages where the nodes lack them; ``None``: nothing). Blocking.
    """
    nodes = node_gpus()
    trials_at_once(nodes, spec)  # refused before anything starts
    config = ray.put(
        HostConfig(
            spec=spec,
            options=options,
            data_dir=None if choice.address else str(data_dir),
            ready_timeout_s=options.startup_timeout,
        )
    )
    host = ray.remote(TrialHost)
    store = RunStore(history_file(data_dir, options.demo))
    close_left_runs(store, spec.sweep_id())
    writer = HeadWriter(store)

    def spawn(group: PlacementGroup, gpus: int) -> Any:
        return host.options(
            num_gpus=gpus,
            num_cpus=0,
            max_restarts=0,
            max_task_retries=0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(group, 0),
            runtime_env=env or None,
        ).remote(config)

    deadlines = Deadlines.for_startup(
        options.startup_timeout, open_s=OPEN_SHIPPED_S if choice.address else 180.0
    )
    pool = Pool(spawn, node_gpus, deadlines=deadlines, on_progress=on_progress)
    lanes = [RayLane(pool, writer, name=f"slot{i}") for i in range(MAX_LANES)]
    fleet = RayFleet(spec, lanes, pool, 0)
    fleet.read(nodes)
    return fleet


async def open_cluster(
    spec: SweepSpec,
    options: ConsoleOptions,
    choice: ClusterChoice,
    data_dir: Path,
    on_progress: Callable[[str], None],
) -> ClusterRun:
    """Connect (a joined cluster's GPU nodes checked), build the lanes, follow the cluster;
    their ``close`` lets the lanes and the cluster go. Raises ``VtcError`` (one line) when
    the cluster cannot be reached, cannot run vtc, or cannot hold a trial."""
    await asyncio.to_thread(connect, choice)
    try:
        env = None
        if choice.address:  # its nodes may lack vtc: shipped, checked before anything starts
            env = await asyncio.to_thread(shipped_env, await asyncio.to_thread(node_gpus))
        fleet = await asyncio.to_thread(
            ray_lanes, spec, options, choice, data_dir, on_progress, env
        )
    except BaseException:
        await asyncio.to_thread(disconnect)
        raise
    fleet.follow()

    async def close() -> None:
        try:
            await fleet.close()
        finally:
            await asyncio.to_thread(disconnect)

    lanes: list[Lane] = list(fleet.lanes)
    return ClusterRun(lanes, close, count=fleet)


def close_left_runs(store: RunStore, sweep_id: str) -> int:
    """The sweep's runs an earlier head left live (killed: its workers and their servers
    went with it): closed as lost, saying why. How many."""
    closed = 0
    for run in store.list(limit=100_000):
        if run.sweep is None or run.sweep.sweep_id != sweep_id or not run.status.live:
            continue
        store.update(
            run.model_copy(
                update={"status": RunStatus.LOST, "ended_because": LEFT_BY_A_KILLED_HEAD}
            )
        )
        closed += 1
    return closed
