"""A cluster sweep on a local Ray instance that declares GPUs this machine does not have.

Ray hands out GPU ids it does not check, so the whole path runs here with the simulator:
each trial's worker gets its own GPU ids from Ray, launches the server pinned to them
(``CUDA_VISIBLE_DEVICES``), runs the load on its node and returns the typed result and the
runs, which the head writes into the board's store; progress comes back while trials run.
A worker killed mid-trial marks the trial lost, naming the node, and the trial runs again.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")

from fakes.ray_sweeps import (  # noqa: E402
    demo_options,
    demo_spec,
    head_runs,
    serving_on,
    spec_from,
    stop_left_servers,
    wait_for_run,
)

from tui.domain.results import RunStatus  # noqa: E402
from tui.domain.sweep import SweepState, TrialState  # noqa: E402
from tui.domain.sweep.cluster import ClusterChoice  # noqa: E402
from tui.modes.ray_cluster import connect, disconnect, ray_lanes  # noqa: E402
from tui.tune.journal import Journal, journal_path  # noqa: E402
from tui.tune.run import SweepRun  # noqa: E402


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "data"
    monkeypatch.setenv("VTC_DATA_DIR", str(data))  # the workers inherit it
    yield data
    stop_left_servers(data)


async def test_each_trial_runs_on_the_gpus_ray_gave_its_worker(data_dir: Path) -> None:
    spec = spec_from(demo_spec(seqs=[8, 16, 32, 64]))
    choice = ClusterChoice(gpus=4)
    progress: list[str] = []
    await asyncio.to_thread(connect, choice)
    try:
        lanes = ray_lanes(spec, demo_options(data_dir), choice, data_dir, progress.append)
        assert len(lanes) == 4  # 4 GPUs, one per trial
        journal = Journal(journal_path(data_dir, spec.sweep_id()), spec)
        run = SweepRun(spec, lanes, journal=journal)
        status = await run.run()
        await asyncio.gather(*(lane.close() for lane in lanes))
    finally:
        await asyncio.to_thread(disconnect)
    assert status.state is SweepState.DONE, status.message
    assert [t.state for t in status.trials] == [TrialState.MEASURED] * 4
    placements = [t.placement for t in status.trials]
    assert all(p is not None and len(p.gpu_ids) == 1 for p in placements)
    # Four lanes held their workers at once: Ray gave each its own GPU.
    assert {p.gpu_ids[0] for p in placements if p is not None} == {"0", "1", "2", "3"}
    assert all(p is not None and (p.gpu_model or "").endswith("(simulated)") for p in placements)
    assert all(p is not None and p.driver == "simulated" and p.vllm_version for p in placements)
    assert all(t.started_at is not None and t.ended_at is not None for t in status.trials)
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
    assert any("load" in line or "starting" in line for line in progress)


def _workers() -> list[psutil.Process]:
    out = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if "ray::TrialHost" in cmdline:
            out.append(proc)
    return out


async def test_a_worker_killed_mid_trial_marks_it_lost_and_runs_it_again(data_dir: Path) -> None:
    spec = spec_from(demo_spec(seqs=[8, 16], num_prompts=40, rate=4.0))  # ~10 s loads
    choice = ClusterChoice(gpus=1)
    await asyncio.to_thread(connect, choice)
    try:
        lanes = ray_lanes(spec, demo_options(data_dir), choice, data_dir, lambda _: None)
        sweep = asyncio.create_task(SweepRun(spec, lanes).run())
        await wait_for_run(data_dir, serving_on("gpu 0"))  # trial 1's load is running now
        (worker,) = _workers()
        worker.send_signal(signal.SIGKILL)
        status = await asyncio.wait_for(sweep, 240)
        await asyncio.gather(*(lane.close() for lane in lanes))
    finally:
        await asyncio.to_thread(disconnect)
    states = [t.state for t in status.trials]
    assert states == [TrialState.LOST, TrialState.MEASURED, TrialState.MEASURED], status.notes
    lost, again = status.trials[0], status.trials[1]
    assert lost.placement is not None and lost.placement.node in lost.diagnosis
    assert again.note == lost.note and again.placement is not None
    assert any(f"trial 1 lost on {lost.placement.node}" in note for note in status.notes)
