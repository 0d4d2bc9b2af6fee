"""A cluster sweep on a test cluster of several nodes on this machine (``ray.cluster_utils``).

Two GPU nodes (one GPU each, declared) and a head without GPUs: the trials are placed on
the GPU nodes only; a node removed while its trial's load runs marks that trial lost with
the node's name, and the trial runs again on the other node. A trial that needs more GPUs
than any node has is refused before anything starts: ``test_ray_local.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")

from fakes.ray_sweeps import (  # noqa: E402
    demo_options,
    demo_spec,
    serving_on,
    spec_from,
    stop_left_servers,
    wait_for_run,
)
from ray.cluster_utils import Cluster  # noqa: E402

from tui.domain.sweep import SweepState, TrialState  # noqa: E402
from tui.domain.sweep.cluster import ClusterChoice  # noqa: E402
from tui.modes.ray_cluster import connect, disconnect, ray_lanes  # noqa: E402
from tui.tune.run import SweepRun  # noqa: E402

SMALL = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024}


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Cluster, Path]]:
    data = tmp_path / "data"
    monkeypatch.setenv("VTC_DATA_DIR", str(data))  # every node's workers inherit it
    made = Cluster(
        initialize_head=True, head_node_args={**SMALL, "num_gpus": 0, "include_dashboard": False}
    )
    try:
        yield made, data
    finally:
        disconnect()
        made.shutdown()
        stop_left_servers(data)


async def test_a_node_lost_mid_trial_marks_it_lost_and_it_runs_again_elsewhere(
    cluster: tuple[Cluster, Path],
) -> None:
    made, data = cluster
    node_a = made.add_node(**SMALL, num_gpus=1)
    node_b = made.add_node(**SMALL, num_gpus=1)
    made.wait_for_nodes()
    a_id, b_id = node_a.node_id[:6], node_b.node_id[:6]
    spec = spec_from(demo_spec(seqs=[8, 16, 32], num_prompts=40, rate=4.0))  # ~10 s loads
    choice = ClusterChoice(address=made.address)
    await asyncio.to_thread(connect, choice)
    lanes = ray_lanes(spec, demo_options(data), choice, data, lambda _: None)
    assert len(lanes) == 2  # the head declares no GPU: one trial per GPU node
    sweep = asyncio.create_task(SweepRun(spec, lanes).run())
    await wait_for_run(data, serving_on(a_id))  # a trial's load runs on node A now
    made.remove_node(node_a)
    status = await asyncio.wait_for(sweep, 240)
    await asyncio.gather(*(lane.close() for lane in lanes))
    assert status.state is SweepState.DONE, status.message
    lost = [t for t in status.trials if t.state is TrialState.LOST]
    assert len(lost) == 1 and lost[0].placement is not None
    assert a_id in lost[0].placement.node and a_id in lost[0].diagnosis
    again = next(t for t in status.trials if t.note == lost[0].note and t is not lost[0])
    assert again.state is TrialState.MEASURED and again.placement is not None
    assert b_id in again.placement.node  # elsewhere: the only node left with a GPU
    measured = [t for t in status.trials if t.state is TrialState.MEASURED]
    assert len(measured) == 3
    assert all(
        t.placement is not None and t.placement.node.split(":")[1] in (a_id, b_id) for t in measured
    )
