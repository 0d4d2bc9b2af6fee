"""A cluster sweep on a local Ray instance that declares GPUs this machine does not have.

Ray hands out GPU ids it does not check, so the whole path runs here with the simulator:
each trial reserves its GPUs in a placement group, its worker gets their ids from Ray,
launches the server pinned to them (``CUDA_VISIBLE_DEVICES``), runs the load on its node
and returns the typed result and the runs, which the head writes into the board's store;
progress streams back while trials run. A worker SIGKILLed mid-trial marks the trial lost,
naming the node, the trial runs again, and the killed worker's server is gone (its warden
stopped it). A trial no node can hold is refused with the reason while the others run; a
sweep none of whose trials fits is refused before anything starts. One instance (4 GPUs)
serves the module, started small and shut down at its end.
"""

from __future__ import annotations

import asyncio
import os
import signal
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
    head_runs,
    serving_on,
    spec_from,
    wait_for_run,
)

from tui.domain.results import RunStatus  # noqa: E402
from tui.domain.sweep import SweepState, TrialState  # noqa: E402
from tui.domain.sweep.cluster import ClusterChoice  # noqa: E402
from tui.modes.ray_cluster import (  # noqa: E402
    SPARE_LANES,
    RayFleet,
    connect,
    disconnect,
    ray_lanes,
)
from tui.modes.sweep import CLUSTER_DIR  # noqa: E402
from tui.tune.gpus import Unplaceable  # noqa: E402
from tui.tune.journal import Journal, journal_path  # noqa: E402
from tui.tune.ray_lane import RayLane  # noqa: E402
from tui.tune.run import SweepRun  # noqa: E402

FOUR = ClusterChoice(gpus=4)


@pytest.fixture(scope="module")
def instance() -> Iterator[ClusterChoice]:
    connect(FOUR)
    try:
        yield FOUR
    finally:
        disconnect()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"  # a local instance's workers are given the head's data dir


async def test_each_trial_runs_on_the_gpus_ray_gave_its_worker(
    instance: ClusterChoice, data_dir: Path
) -> None:
    spec = spec_from(demo_spec(seqs=[8, 16, 32, 64]))
    progress: list[str] = []
    fleet = ray_lanes(spec, demo_options(data_dir), instance, data_dir, progress.append)
    assert fleet.width() == 4 + SPARE_LANES  # 4 GPUs, one per trial, and the spare ones
    journal = Journal(journal_path(data_dir, spec.sweep_id()), spec)
    status = await SweepRun(spec, fleet.lanes, journal=journal, count=fleet).run()
    await fleet.close()
    assert fleet.pool.opened == 4 and fleet.pool.placed == 0  # a worker per GPU, all let go
    assert status.state is SweepState.DONE, status.message
    assert [t.state for t in status.trials] == [TrialState.MEASURED] * 4
    placements = [t.placement for t in status.trials]
    assert all(p is not None and len(p.gpu_ids) == 1 and p.gpu_ids[0] in "0123" for p in placements)
    assert all(p is not None and (p.gpu_model or "").endswith("(simulated)") for p in placements)
    assert all(p is not None and p.driver == "simulated" and p.vllm_version for p in placements)
    for a in status.trials:  # trials that ran at the same time never shared a GPU
        for b in status.trials:
            assert a.started_at is not None and a.ended_at is not None
            assert b.started_at is not None and b.ended_at is not None
            overlap = a.index != b.index and a.started_at < b.ended_at and b.started_at < a.ended_at
            assert not (overlap and a.placement == b.placement)
    runs = {r.id: r for r in head_runs(data_dir)}
    for trial in status.trials:
        run_record = runs[trial.run_id]
        assert trial.placement is not None and run_record.sweep is not None
        assert run_record.sweep.trial == trial.index
        assert run_record.sweep.where == trial.placement.describe()
        assert run_record.repro is not None
        assert run_record.repro.env["CUDA_VISIBLE_DEVICES"] == trial.placement.gpu_ids[0]
        assert run_record.bench is not None and run_record.series  # the load and telemetry
        assert run_record.status is RunStatus.STOPPED  # each worker stopped its server
    assert len(Journal(journal_path(data_dir, spec.sweep_id()), spec).finished) == 4
    assert any("load" in line or "starting" in line for line in progress)  # streamed
    assert not list((data_dir / CLUSTER_DIR).rglob("*"))[1:]  # scratch folders cleared


async def _busy_lane(fleet: RayFleet) -> RayLane:
    """The lane whose worker runs a server now (waited for: the head wrote it READY)."""
    for lane in fleet.lanes:
        if lane.placement is not None:
            return lane
    raise AssertionError("no lane holds a worker although a run is ready")


async def test_a_worker_killed_mid_trial_takes_its_server_and_the_trial_runs_again(
    instance: ClusterChoice, data_dir: Path
) -> None:
    spec = spec_from(demo_spec(seqs=[8], num_prompts=40, rate=4.0))  # a ~10 s load
    fleet = ray_lanes(spec, demo_options(data_dir), instance, data_dir, lambda _: None)
    began = time.monotonic()
    sweep = asyncio.create_task(SweepRun(spec, fleet.lanes, count=fleet).run())
    await wait_for_run(data_dir, serving_on("gpu"))  # the trial's load is running now
    pids = await (await _busy_lane(fleet)).pids()
    assert set(pids) == {"worker", "server"}
    os.kill(pids["worker"], signal.SIGKILL)
    took = await gone([pids["server"]], deadline_s=60)  # its warden stopped the server
    status = await asyncio.wait_for(sweep, 240)
    await fleet.close()
    wall = time.monotonic() - began
    print(f"\nSIGKILLed worker: server gone in {took:.1f} s, sweep {wall:.0f} s")
    assert [t.state for t in status.trials] == [TrialState.LOST, TrialState.MEASURED]
    lost, again = status.trials
    assert lost.placement is not None and lost.placement.node in lost.diagnosis
    assert again.note == lost.note and again.placement is not None
    assert any(f"trial 1 lost on {lost.placement.node}" in note for note in status.notes)


async def test_a_trial_no_node_can_hold_is_refused_with_the_reason_and_the_rest_run(
    instance: ClusterChoice, data_dir: Path
) -> None:
    text = demo_spec(seqs=[8]).replace("max_num_seqs = [8]", "tensor_parallel_size = [1, 8]")
    spec = spec_from(text.replace("[base.flags]", "[base.flags]\nmax_num_seqs = 8"))
    fleet = ray_lanes(spec, demo_options(data_dir), instance, data_dir, lambda _: None)
    began = time.monotonic()
    status = await asyncio.wait_for(SweepRun(spec, fleet.lanes, count=fleet).run(), 240)
    await fleet.close()
    print(f"\ntrial larger than any node: sweep {time.monotonic() - began:.0f} s")
    by_tp = {t.params["tensor_parallel_size"]: t for t in status.trials}
    assert by_tp[1].state is TrialState.MEASURED
    refused = by_tp[8]
    assert refused.state is TrialState.PRUNED and not refused.started
    assert "needs 8 GPU(s) on one node" in refused.diagnosis
    assert "the largest alive node has 4" in refused.diagnosis


def test_a_sweep_no_node_can_hold_is_refused_before_anything_starts(
    instance: ClusterChoice, data_dir: Path
) -> None:
    text = demo_spec(seqs=[8]).replace(
        "max_model_len = 1024", "max_model_len = 1024\ntensor_parallel_size = 8"
    )
    with pytest.raises(Unplaceable) as caught:
        ray_lanes(spec_from(text), demo_options(data_dir), instance, data_dir, lambda _: None)
    line = caught.value.one_line()
    assert "needs 8 GPU(s) on one node" in line and "the largest alive node has 4" in line
    assert not (data_dir / "demo-runs.sqlite").exists()  # nothing started, nothing written
