"""A cluster sweep on a test cluster of several nodes on this machine (``ray.cluster_utils``).

A head without GPUs and GPU nodes (declared) added and removed by each test: the trials are
placed on the GPU nodes only. A node removed while its trial's load runs marks that trial
lost with the node's name, its server goes with it, and the trial runs again on the other
node; when the removed node was the only one large enough, the retry is refused with the
reason instead of waiting for it. A node that joins mid-sweep takes trials at once. Each
sweep ends in a bounded time with every trial accounted for; the times are printed
(``-s``). A trial larger than any node, and a SIGKILLed worker: ``test_ray_local.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")

from fakes.ray_sweeps import (  # noqa: E402
    demo_options,
    demo_spec,
    gone,
    serving_on,
    spec_from,
    wait_for_run,
)
from ray.cluster_utils import Cluster  # noqa: E402

from tui.domain.sweep import SweepState, TrialState  # noqa: E402
from tui.domain.sweep.cluster import ClusterChoice  # noqa: E402
from tui.modes.ray_cluster import (  # noqa: E402
    SPARE_LANES,
    RayFleet,
    connect,
    disconnect,
    ray_lanes,
)
from tui.tune.ray_lane import RayLane  # noqa: E402
from tui.tune.run import SweepRun  # noqa: E402

SMALL = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024}
BOUND_S = 240  # a sweep that runs longer hangs


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    mp = pytest.MonkeyPatch()
    nodes_dir = tmp_path_factory.mktemp("nodes")
    mp.setenv("VTC_DATA_DIR", str(nodes_dir))  # every node's workers inherit it
    made = Cluster(
        initialize_head=True, head_node_args={**SMALL, "num_gpus": 0, "include_dashboard": False}
    )
    try:
        connect(ClusterChoice(address=made.address))
        yield made
    finally:
        disconnect()
        made.shutdown()
        mp.undo()


@pytest.fixture
def nodes(cluster: Cluster) -> Iterator[list[object]]:
    """The GPU nodes a test adds: removed at its end (the head stays)."""
    added: list[object] = []
    yield added
    for node in added:
        if node in cluster.worker_nodes:
            cluster.remove_node(node)


def _gpu_node(cluster: Cluster, nodes: list[object], gpus: int) -> object:
    node = cluster.add_node(**SMALL, num_gpus=gpus)
    nodes.append(node)
    cluster.wait_for_nodes()
    return node


def _on(lanes: list[RayLane], node_id: str) -> RayLane:
    (lane,) = [x for x in lanes if x.placement is not None and node_id in x.placement.node]
    return lane


async def _width_becomes(fleet: RayFleet, width: int) -> None:
    """The fleet's width follows the alive nodes (read every round while the sweep runs)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + 60
    while fleet.width() != width:
        assert loop.time() < end, f"width {fleet.width()}, not {width}"
        await asyncio.sleep(0.2)


async def test_a_node_lost_mid_trial_takes_its_server_and_the_trial_runs_again_elsewhere(
    cluster: Cluster, nodes: list[object], tmp_path: Path
) -> None:
    node_a, node_b = _gpu_node(cluster, nodes, 1), _gpu_node(cluster, nodes, 1)
    a_id, b_id = node_a.node_id[:6], node_b.node_id[:6]  # type: ignore[attr-defined]
    spec = spec_from(demo_spec(seqs=[8, 16], num_prompts=40, rate=4.0))  # ~10 s loads
    choice = ClusterChoice(address=cluster.address)
    fleet = ray_lanes(spec, demo_options(tmp_path), choice, tmp_path, lambda _: None)
    fleet.follow()
    began = time.monotonic()
    sweep = asyncio.create_task(SweepRun(spec, fleet.lanes, count=fleet).run())
    await wait_for_run(tmp_path, serving_on(a_id))  # a trial's load runs on node A now
    server = (await _on(fleet.lanes, a_id).pids())["server"]
    cluster.remove_node(node_a)
    took = await gone([server], deadline_s=60)
    await _width_becomes(fleet, 1 + SPARE_LANES)  # the node that left stops counting
    status = await asyncio.wait_for(sweep, BOUND_S)
    await fleet.close()
    print(
        f"\nnode removed: its server gone in {took:.1f} s, sweep {time.monotonic() - began:.0f} s"
    )
    assert status.state is SweepState.DONE, status.message
    lost = [t for t in status.trials if t.state is TrialState.LOST]
    assert len(lost) == 1 and lost[0].placement is not None
    assert a_id in lost[0].placement.node and a_id in lost[0].diagnosis
    again = next(t for t in status.trials if t.note == lost[0].note and t is not lost[0])
    assert again.state is TrialState.MEASURED and again.placement is not None
    assert b_id in again.placement.node  # elsewhere: the only node left with a GPU
    measured = [t for t in status.trials if t.state is TrialState.MEASURED]
    assert sorted(t.note for t in measured) == sorted({t.note for t in status.trials})


async def test_when_the_only_node_large_enough_dies_the_retry_is_refused_not_waited_on(
    cluster: Cluster, nodes: list[object], tmp_path: Path
) -> None:
    big = _gpu_node(cluster, nodes, 2)
    _gpu_node(cluster, nodes, 1)  # alive throughout, too small for the trial
    big_id = big.node_id[:6]  # type: ignore[attr-defined]
    text = demo_spec(seqs=[8], num_prompts=40, rate=4.0)
    spec = spec_from(
        text.replace("max_model_len = 1024", "max_model_len = 1024\ntensor_parallel_size = 2")
    )
    choice = ClusterChoice(address=cluster.address)
    fleet = ray_lanes(spec, demo_options(tmp_path), choice, tmp_path, lambda _: None)
    began = time.monotonic()
    sweep = asyncio.create_task(SweepRun(spec, fleet.lanes, count=fleet).run())
    await wait_for_run(tmp_path, serving_on(big_id))
    cluster.remove_node(big)
    status = await asyncio.wait_for(sweep, BOUND_S)
    await fleet.close()
    print(f"\nonly large node removed: sweep ended in {time.monotonic() - began:.0f} s")
    assert [t.state for t in status.trials] == [TrialState.LOST, TrialState.PRUNED]
    lost, refused = status.trials
    assert refused.note == lost.note and not refused.started
    assert "needs 2 GPU(s) on one node" in refused.diagnosis
    assert "the largest alive node has 1" in refused.diagnosis


async def test_a_node_that_joins_mid_sweep_takes_trials(
    cluster: Cluster, nodes: list[object], tmp_path: Path
) -> None:
    node_a = _gpu_node(cluster, nodes, 1)
    a_id = node_a.node_id[:6]  # type: ignore[attr-defined]
    spec = spec_from(demo_spec(seqs=[8, 16], num_prompts=24, rate=4.0))  # ~6 s loads
    choice = ClusterChoice(address=cluster.address)
    fleet = ray_lanes(spec, demo_options(tmp_path), choice, tmp_path, lambda _: None)
    fleet.follow()
    assert fleet.width() == 1 + SPARE_LANES
    began = time.monotonic()
    sweep = asyncio.create_task(SweepRun(spec, fleet.lanes, count=fleet).run())
    await wait_for_run(tmp_path, serving_on(a_id))  # the one GPU is taken; the rest wait
    node_b = _gpu_node(cluster, nodes, 1)  # blocks the loop a moment (Ray: main thread)
    b_id = node_b.node_id[:6]  # type: ignore[attr-defined]
    await _width_becomes(fleet, 2 + SPARE_LANES)  # the batches widen with the new node
    status = await asyncio.wait_for(sweep, BOUND_S)
    await fleet.close()
    print(f"\nnode added mid-sweep: sweep {time.monotonic() - began:.0f} s")
    assert status.state is SweepState.DONE, status.message
    assert [t.state for t in status.trials] == [TrialState.MEASURED] * 2
    where = [t.placement.node for t in status.trials if t.placement is not None]
    assert any(b_id in node for node in where)  # the new node took a trial
    assert all(a_id in node or b_id in node for node in where)
