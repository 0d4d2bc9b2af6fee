"""The Ray side of ``vtc sweep --ray``: join or start the cluster, its lanes, let them go.

With an address (``--ray ADDRESS``: ``auto``, ``host:6379``, ``ray://host:10001``) the head
joins that cluster; without one it starts a local instance, small and quiet (its object
store at :data:`LOCAL_OBJECT_STORE_BYTES`, no dashboard) with the GPUs ``--ray-gpus``
declares (a CPU machine declares them too: Ray hands out GPU ids it does not check, which
is how ``--demo`` and the tests run the whole path without a GPU). Each trial reserves its
``tp x pp`` GPUs in a placement group and its worker asks for no CPU (the server and its
load use the node's cores; Ray's CPU count would only cap how many trials a node takes).

The cluster is read live, never counted once: there are as many lanes as the alive nodes
hold trials now plus :data:`SPARE_LANES`, whose trials wait for placement (a node that joins
mid-sweep takes them at once; Ray places a waiting group as soon as GPUs are free), and
each placement reads the alive nodes again (:class:`tui.tune.ray_lane.Placer`), so a node
that left stops counting. A sweep none of whose trials any alive node can hold is refused
before anything starts; a single trial too large for every node is refused when its turn
comes, with the reason, while the others run.

:func:`open_cluster` is the one way in and out (connect, lanes, close, disconnect), used by
``vtc sweep --ray`` and the console's sweep composer alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
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
from tui.store.history import RunStore
from tui.tune.gpus import trials_at_once
from tui.tune.lanes import ClusterRun, Lane
from tui.tune.ray_lane import HeadWriter, Placer, RayLane

LOCAL_OBJECT_STORE_BYTES = 100 * 1024 * 1024  # replies are small: a few runs' records
LOCAL_CPUS = 1  # the workers ask for none; Ray keeps this many idle workers ready
SPARE_LANES = 4  # trials waiting for placement beyond what the alive nodes hold now
LEFT_BY_A_KILLED_HEAD = "the sweep's head was killed while it ran; its trial runs again"


def connect(choice: ClusterChoice) -> None:
    """Join the cluster at ``choice.address``, or start a local instance (blocking)."""
    if ray.is_initialized():
        return
    try:
        if choice.address:
            ray.init(address=choice.address, log_to_driver=False)
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


def lane_count(spec: SweepSpec, nodes: dict[str, float]) -> int:
    """How many lanes: the trials the alive nodes hold at once now, plus the spare ones.
    Raises :class:`tui.tune.gpus.Unplaceable` when no alive node holds any trial."""
    return trials_at_once(nodes, spec) + SPARE_LANES


def ray_lanes(
    spec: SweepSpec,
    options: ConsoleOptions,
    choice: ClusterChoice,
    data_dir: Path,
    on_progress: Callable[[str], None],
) -> list[RayLane]:
    """The sweep's lanes on the connected cluster, sharing one placer and the head's store.

    Raises :class:`tui.tune.gpus.Unplaceable` (one line) when no alive node can hold any
    trial of the spec. Blocking.
    """
    width = lane_count(spec, node_gpus())
    config = HostConfig(
        spec=spec,
        options=options,
        data_dir=None if choice.address else str(data_dir),
        ready_timeout_s=options.startup_timeout,
    )
    host = ray.remote(TrialHost)
    store = RunStore(data_dir / ("demo-runs.sqlite" if options.demo else "runs.sqlite"))
    close_left_runs(store, spec.sweep_id())
    writer = HeadWriter(store)
    placer = Placer(node_gpus)

    def spawn(group: PlacementGroup, gpus: int) -> Any:
        return host.options(
            num_gpus=gpus,
            num_cpus=0,
            max_restarts=0,
            max_task_retries=0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(group, 0),
        ).remote(config)

    return [
        RayLane(spawn, writer, placer, name=f"slot{i}", on_progress=on_progress)
        for i in range(width)
    ]


async def open_cluster(
    spec: SweepSpec,
    options: ConsoleOptions,
    choice: ClusterChoice,
    data_dir: Path,
    on_progress: Callable[[str], None],
) -> ClusterRun:
    """Connect, build the lanes; their ``close`` lets the lanes and the cluster go. Raises
    ``VtcError`` (one line) when the cluster cannot be reached or hold a trial."""
    await asyncio.to_thread(connect, choice)
    try:
        built = await asyncio.to_thread(ray_lanes, spec, options, choice, data_dir, on_progress)
    except BaseException:
        await asyncio.to_thread(disconnect)
        raise

    async def close() -> None:
        try:
            await asyncio.gather(*(lane.close() for lane in built), return_exceptions=True)
        finally:
            await asyncio.to_thread(disconnect)

    lanes: list[Lane] = list(built)
    return ClusterRun(lanes, close)


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
