"""A cluster sweep's workers without a cluster: deadlines, hand-on, parking, letting go.

Every call the head waits on has a deadline counted in elapsed time: a worker that never
answers ``start`` or a load is given up within it (killed, its GPUs back) and the trial is
lost with the reason, then runs once more on a new worker; one that never stops its server
after the trial is killed and the result stands. Placement given up while nothing of the
sweep holds GPUs counts the time that passed, not a nominal time per round. A finished
trial's worker goes straight to a trial waiting for as many GPUs (no new worker starts),
back to the cluster when a trial of another size waits, or parked for the next trial.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray  # the ray extra: run in CI's Ray stage, where it is installed
pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")

from fakes.ray_workers import FakeGroups, FakeWorker, patch_ray  # noqa: E402

from tui.domain.flags.serve import ServeFlags  # noqa: E402
from tui.domain.results import SweepTag  # noqa: E402
from tui.domain.sweep import SweepSpec, SweepState, TrialState  # noqa: E402
from tui.domain.workload import LoadSpec  # noqa: E402
from tui.store.history import RunStore  # noqa: E402
from tui.tune.lanes import LaneLost  # noqa: E402
from tui.tune.ray_lane import HeadWriter, RayLane  # noqa: E402
from tui.tune.ray_slots import Deadlines, Pool  # noqa: E402
from tui.tune.run import SweepRun  # noqa: E402

FLAGS = ServeFlags(model="m")
TAG = SweepTag(sweep_id="s", trial=1, note="n")
ONE_NODE = {"node-a": 1.0}


def _pool(
    workers: list[FakeWorker], groups: FakeGroups, deadlines: Deadlines, **kw: object
) -> Pool:
    handed = iter(workers)
    return Pool(
        lambda group, need: next(handed),
        kw.pop("node_gpus", lambda: ONE_NODE),  # type: ignore[arg-type]
        deadlines=deadlines,
        make_group=groups,  # type: ignore[arg-type]
        round_s=0.05,
        **kw,  # type: ignore[arg-type]
    )


def _lanes(pool: Pool, tmp_path: Path, n: int) -> list[RayLane]:
    writer = HeadWriter(RunStore(tmp_path / "runs.sqlite"))
    return [RayLane(pool, writer, name=f"slot{i}") for i in range(n)]


async def test_a_finished_trials_worker_goes_to_the_trial_waiting_for_as_many_gpus(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    groups = FakeGroups(gpus=1)
    patch_ray(monkeypatch, groups)
    pool = _pool([FakeWorker("node-a"), FakeWorker("node-b")], groups, Deadlines())
    first, second, third = _lanes(pool, tmp_path, 3)
    await first.start(FLAGS, TAG)
    waiting = asyncio.ensure_future(second.start(FLAGS, TAG))  # no GPU free: it waits
    await asyncio.sleep(0.2)
    assert not waiting.done() and pool.placed == 1
    await first.release()  # its server stopped, its worker handed on
    started = await asyncio.wait_for(waiting, 10)
    assert started.ok and second.placement is not None and second.placement.node == "node-a"
    await second.release()  # nobody waits: parked
    await third.start(FLAGS, TAG)
    assert pool.opened == 1  # one worker served all three trials
    await third.close()


async def test_a_freed_worker_is_let_go_when_a_trial_of_another_size_waits(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    groups = FakeGroups(gpus=2)
    killed = patch_ray(monkeypatch, groups)
    small, large = FakeWorker("node-a"), FakeWorker("node-a")
    pool = _pool([small, large], groups, Deadlines(), node_gpus=lambda: {"node-a": 2.0})
    one, two = _lanes(pool, tmp_path, 2)
    await one.start(FLAGS, TAG)
    waiting = asyncio.ensure_future(two.start(ServeFlags(model="m", tensor_parallel_size=2), TAG))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    await one.release()
    assert (await asyncio.wait_for(waiting, 10)).ok
    assert "close" in small.calls and small in killed.actors  # its GPUs went back
    assert pool.opened == 2
    await two.close()


async def test_a_start_that_never_answers_is_lost_within_its_deadline_and_run_once_more(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    groups = FakeGroups(gpus=1)
    killed = patch_ray(monkeypatch, groups)
    hung = FakeWorker("node-a", hang=frozenset({"start"}))
    pool = _pool([hung, FakeWorker("node-b")], groups, Deadlines(start_s=0.3))
    spec = SweepSpec.model_validate(
        {
            "name": "deadline",
            "strategy": "grid",
            "base": {"model": "m"},
            "parameters": {"max_num_seqs": [8]},
            "workload": {"num_prompts": 4},
        }
    )
    lanes = _lanes(pool, tmp_path, 2)
    status = await asyncio.wait_for(SweepRun(spec, lanes).run(), 30)
    assert status.state is SweepState.DONE, status.message
    lost, again = status.trials
    assert lost.state is TrialState.LOST and again.state is TrialState.MEASURED
    assert "node-a" in lost.diagnosis and "did not answer start within 0.3 s" in lost.diagnosis
    assert again.placement is not None and again.placement.node == "node-b"
    assert any("trial 1 lost on node-a" in note for note in status.notes)
    assert hung in killed.actors and pool.placed == 0


async def test_a_load_that_never_ends_is_lost_within_the_loads_own_bound(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    groups = FakeGroups(gpus=1)
    patch_ray(monkeypatch, groups)
    pool = _pool([FakeWorker("node-a", hang=frozenset({"bench"}))], groups, Deadlines(margin_s=0))
    (lane,) = _lanes(pool, tmp_path, 1)
    await lane.start(FLAGS, TAG)
    load = LoadSpec(num_prompts=2, request_rate=20.0, request_timeout_s=0.2, num_warmups=0)
    with pytest.raises(LaneLost, match=r"did not answer bench within 0.3 s"):
        await asyncio.wait_for(lane.bench(load, model=None, goodput={}), 30)
    assert pool.placed == 0 and lane.placement is None


async def test_a_worker_that_never_stops_its_server_is_killed_and_the_result_stands(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    groups = FakeGroups(gpus=1)
    killed = patch_ray(monkeypatch, groups)
    said: list[str] = []
    worker = FakeWorker("node-a", hang=frozenset({"stop"}))
    pool = _pool([worker], groups, Deadlines(stop_s=0.2), on_progress=said.append)
    (lane,) = _lanes(pool, tmp_path, 1)
    assert (await lane.start(FLAGS, TAG)).ok
    await asyncio.wait_for(lane.release(), 10)
    assert worker in killed.actors and pool.placed == 0
    assert any("did not stop its server within 0.2 s" in line for line in said)


async def test_placement_is_given_up_after_the_elapsed_idle_deadline_not_a_count_of_rounds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    groups = FakeGroups(gpus=0)  # nothing is ever placed
    patch_ray(monkeypatch, groups)
    now = [0.0]
    reads = [0]

    def slow_nodes() -> dict[str, float]:  # each read of the cluster takes 4 s
        reads[0] += 1
        now[0] += 4.0
        return ONE_NODE

    pool = _pool([], groups, Deadlines(idle_s=10.0), node_gpus=slow_nodes, clock=lambda: now[0])
    (lane,) = _lanes(pool, tmp_path, 1)
    with pytest.raises(LaneLost, match="within 10 s while none of the sweep's trials held any"):
        await asyncio.wait_for(lane.start(FLAGS, TAG), 30)
    assert reads[0] <= 5  # 10 s of reads, not 10 s / 0.05 s of nominal rounds
    assert not groups.made  # the waiting group was removed


def test_a_loads_deadline_is_its_arrival_span_and_each_wave_waiting_out_its_timeout() -> None:
    d = Deadlines(margin_s=10.0)
    paced = LoadSpec(
        num_prompts=40, request_rate=4.0, request_timeout_s=30, num_warmups=0, max_concurrency=None
    )
    assert d.bench_s(paced) == pytest.approx(10.0 + 30.0 + 10.0)
    capped = LoadSpec(
        num_prompts=40, request_rate=float("inf"), max_concurrency=8, request_timeout_s=30.0
    )
    assert d.bench_s(capped) >= 5 * 30.0 + 10.0
    timed = LoadSpec(duration_s=60.0, request_rate=float("inf"), max_concurrency=4)
    assert d.bench_s(timed) >= 60.0 + timed.request_timeout_s
