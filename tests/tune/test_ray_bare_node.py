"""A GPU node whose Python has Ray and nothing of vtc joins a cluster and runs trials.

The head (a test cluster of this process, no GPUs) is joined by a node started with
``ray start --address`` from a second environment that has only ``ray[default]`` (the same
Ray and Python): no vtc, none of its packages. The sweep ships vtc to it through Ray's
``runtime_env`` (its code, and its packages since the node lacks them, checked before the
sweep starts) and the trial lands on that node and is measured there. The first run on a
machine builds that environment (``tests/fakes/ray_bare_node.py``, cached); each run has Ray
install vtc's packages on the node (a Ray session's own cache): the test's long part.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")

from fakes.ray_bare_node import bare_node_python, lacks  # noqa: E402
from fakes.ray_sweeps import demo_options, demo_spec, spec_from  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from tui.domain.sweep import SweepState, TrialState  # noqa: E402
from tui.domain.sweep.cluster import ClusterChoice  # noqa: E402
from tui.modes.ray_cluster import connect, disconnect, node_gpus, open_cluster  # noqa: E402
from tui.tune.run import SweepRun  # noqa: E402

JOIN_S = 120.0  # the node registered with the head (a bound for a hung start)
SWEEP_S = 1200.0  # shipping installs the packages on the node first: minutes on a busy machine


@pytest.fixture
def bare_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Cluster, str]]:
    """A head without GPUs and a 1-GPU node from the bare environment; the node's id."""
    python, why = bare_node_python()
    if python is None:
        pytest.skip(f"no environment with Ray alone could be built: {why}")
    assert lacks(python, "tui") and lacks(python, "httpx")  # vtc and its packages: absent
    monkeypatch.chdir(tmp_path)  # Ray puts the head's directory on its workers' path: no vtc
    head = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "num_gpus": 0, "include_dashboard": False},
    )
    node: subprocess.Popen[bytes] | None = None
    try:
        connect(ClusterChoice(address=head.address))
        before = set(node_gpus())
        env = {**os.environ, "VTC_DATA_DIR": str(tmp_path / "node-data")}
        env.pop("PYTHONPATH", None)  # nothing of the head's checkout on the node's path
        argv = [str(python), "-m", "ray.scripts.scripts", "start", "--block"]
        argv += [f"--address={head.address}", "--num-cpus=1", "--num-gpus=1"]
        node = subprocess.Popen(
            [*argv, "--disable-usage-stats"],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        began = time.monotonic()
        while not (joined := [n for n in node_gpus() if n not in before]):
            assert node.poll() is None, "the bare node's ray start exited"
            assert time.monotonic() - began < JOIN_S, "the bare node never joined"
            time.sleep(0.5)
        yield head, joined[0]
    finally:
        disconnect()
        if node is not None and node.poll() is None:
            os.killpg(node.pid, signal.SIGTERM)  # ray start --block stops what it started
            try:
                node.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()
        head.shutdown()


async def test_a_node_with_ray_alone_runs_the_sweeps_trials(
    bare_node: tuple[Cluster, str], tmp_path: Path
) -> None:
    head, node_id = bare_node
    spec = spec_from(demo_spec(seqs=[8]))
    data = tmp_path / "head-data"
    said: list[str] = []
    began = time.monotonic()
    cluster = await open_cluster(
        spec, demo_options(data), ClusterChoice(address=head.address), data, said.append
    )
    shipped = time.monotonic() - began
    try:
        run = SweepRun(spec, cluster.lanes, count=cluster.count)
        status = await asyncio.wait_for(run.run(), SWEEP_S)
    finally:
        await cluster.close()
    print(f"\nbare node: shipped and checked in {shipped:.0f} s, sweep {status.elapsed_s:.0f} s")
    assert status.state is SweepState.DONE, status.message
    assert [t.state for t in status.trials] == [TrialState.MEASURED]
    assert all(t.placement is not None and node_id[:6] in t.placement.node for t in status.trials)
