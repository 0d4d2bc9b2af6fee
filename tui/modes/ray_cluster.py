"""The Ray side of ``vtc sweep --ray``: join or start the cluster, count and place the lanes.

With an address (``--ray ADDRESS``: ``auto``, ``host:6379``, ``ray://host:10001``) the head
joins that cluster; without one it starts a local instance, small and quiet (its object
store at :data:`LOCAL_OBJECT_STORE_BYTES`, no dashboard) with the GPUs ``--ray-gpus``
declares (a CPU machine declares them too: Ray hands out GPU ids it does not check, which
is how ``--demo`` and the tests run the whole path without a GPU). Each lane's worker asks
for ``tp x pp`` GPUs and no CPU (the server and its load use the node's cores; Ray's CPU
count would only cap how many trials a node takes). How many lanes: every alive node's
GPUs divided by what one trial needs; none is refused before anything starts
(:func:`tui.tune.gpus.trials_at_once`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import ray

from tui.domain.results import RunStatus
from tui.domain.sweep.cluster import ClusterChoice
from tui.domain.sweep.spec import SweepSpec
from tui.modes.options import ConsoleOptions, SetupError
from tui.modes.ray_host import HostConfig, TrialHost, stop_left_servers
from tui.modes.sweep import CLUSTER_DIR
from tui.store.history import RunStore
from tui.tune.gpus import gpus_per_trial, trials_at_once
from tui.tune.ray_lane import HeadWriter, RayLane

LOCAL_OBJECT_STORE_BYTES = 100 * 1024 * 1024  # replies are small: a few runs' records
LOCAL_CPUS = 1  # the workers ask for none; Ray keeps this many idle workers ready
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


def node_gpus() -> dict[str, float]:
    """Every alive node's GPUs (its id -> how many the cluster declares)."""
    return {
        str(node["NodeID"]): float(node.get("Resources", {}).get("GPU", 0.0))
        for node in ray.nodes()
        if node.get("Alive")
    }


def sweep_up(spec: SweepSpec, data_dir: Path) -> list[str]:
    """After a sweep on a local instance: stop what its gone workers left on this machine
    (a killed worker's server). A joined cluster's nodes do it when a worker next opens
    there. Blocking."""
    return stop_left_servers(data_dir / CLUSTER_DIR / spec.sweep_id(), head_run="")


def disconnect() -> None:
    """Leave the cluster (a local instance stops with it)."""
    if ray.is_initialized():
        ray.shutdown()


def ray_lanes(
    spec: SweepSpec,
    options: ConsoleOptions,
    choice: ClusterChoice,
    data_dir: Path,
    on_progress: Callable[[str], None],
) -> list[RayLane]:
    """One lane per trial the cluster holds at once, each spawning its own worker.

    Raises :class:`tui.tune.gpus.Unplaceable` (one line) when no node has a trial's GPUs.
    The head's run store is where every lane writes the nodes' runs.
    """
    width = trials_at_once(node_gpus(), spec)
    per_trial = gpus_per_trial(spec)
    config = HostConfig(
        spec=spec,
        options=options,
        head_run=f"head{os.getpid()}-{uuid.uuid4().hex[:6]}",
        data_dir=None if choice.address else str(data_dir),
        ready_timeout_s=options.startup_timeout,
    )
    host = ray.remote(TrialHost)
    store = RunStore(data_dir / ("demo-runs.sqlite" if options.demo else "runs.sqlite"))
    close_left_runs(store, spec.sweep_id())
    writer = HeadWriter(store)

    def spawn() -> object:
        return host.options(
            num_gpus=per_trial, num_cpus=0, max_restarts=0, max_task_retries=0
        ).remote(config)

    return [RayLane(spawn, writer, name=f"slot{i}", on_progress=on_progress) for i in range(width)]


def close_left_runs(store: RunStore, sweep_id: str) -> int:
    """The sweep's runs an earlier head left live (killed, its workers went with it, their
    servers are stopped by the new workers): closed as lost, saying why. How many."""
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
