"""Twin-first: rank on the twin, confirm on the "real" lane (a simulator on a hidden profile)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest
from fakes.twin_lanes import HiddenServer

from tui.domain.results import SweepTag
from tui.domain.sweep import SweepState, TrialState
from tui.tune.journal import Journal
from tui.tune.lanes import Lane
from tui.tune.report import sweep_json, trial_line
from tui.tune.run import SweepRun
from tui.tune.strategies.twin import CALIBRATE
from tui.tune.twin import TwinObservation, WhatIfTwin, catalogue_twin
from tui.tune.twin_profile import ProfileTwin, cold_profile
from tui.tune.whatif_lane import WhatIfLane


@pytest.fixture
def server(tmp_path: Path) -> HiddenServer:
    return HiddenServer(tmp_path)


async def test_it_finds_the_grids_best_with_a_fifth_of_its_starts(server: HiddenServer) -> None:
    grid = await SweepRun(server.spec("grid"), [server.lane()]).run()
    twin = await SweepRun(server.spec(), [server.lane()]).run()
    assert grid.best is not None and twin.best is not None and twin.best.slo_met
    assert twin.best.params == grid.best.params
    assert twin.starts <= grid.starts / 5
    assert twin.state is SweepState.DONE
    stop = twin.notes[-1]
    assert stop.startswith(f"twin: the real best {twin.best.objective:.1f} is confirmed")
    assert "the twin's error of" in stop  # the error it stopped within, stated


async def test_each_trial_says_whether_its_number_is_predicted_or_measured(
    server: HiddenServer,
) -> None:
    status = await SweepRun(server.spec(), [server.lane()]).run()
    predicted = [t for t in status.trials if t.predicted]
    measured = [t for t in status.trials if not t.predicted]
    assert len(predicted) == 15  # the whole space, ranked on the twin (one row each)
    assert all(t.lane == "twin" and not t.started for t in predicted)
    assert all(t.verdict_text.startswith("predicted ") for t in predicted)
    assert all((t.predicted_by or "").startswith("predicted (twin sweep-cold") for t in predicted)
    assert measured and all(t.started and t.lane == "real" for t in measured)
    assert status.starts == len(measured)
    assert status.best is not None and not status.best.predicted
    report = sweep_json(status, server.spec())
    sources = {t["index"]: t["source"] for t in report["trials"]}
    assert {sources[t.index] for t in predicted} == {"predicted"}
    assert {sources[t.index] for t in measured} == {"measured"}
    assert all(": predicted " not in trial_line(t, status.objective) for t in measured)
    assert all("predicted " in trial_line(t, status.objective) for t in predicted)


async def test_the_first_start_calibrates_the_cold_twin_and_every_real_trial_is_confirmed(
    server: HiddenServer,
) -> None:
    status = await SweepRun(server.spec(), [server.lane()]).run()
    first, *rest = [t for t in status.trials if not t.predicted]
    phases = [m.phase for m in first.measurements]
    assert phases[:3] == [f"{CALIBRATE} 1", f"{CALIBRATE} 2", f"{CALIBRATE} 3"]
    assert phases[3] == "full"
    for trial in (first, *rest):
        seeds = [m.load.seed for m in trial.measurements if m.phase.startswith("seed")]
        assert seeds == [0, 1, 2]  # the confirmation seeds, the worst standing for it
        held = [m for m in trial.measurements if m.phase.startswith("seed")]
        assert trial.objective == min(m.objective for m in held)
    assert all(not any(m.phase.startswith(CALIBRATE) for m in t.measurements) for t in rest)


async def test_predictions_are_not_journaled_and_a_rerun_replays_the_real_trials(
    server: HiddenServer, tmp_path: Path
) -> None:
    spec = server.spec()
    path = tmp_path / "journal.jsonl"
    first = await SweepRun(spec, [server.lane()], journal=Journal(path, spec)).run()
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    journaled = [x["trial"] for x in lines if "trial" in x]
    assert len(journaled) == first.starts
    assert all(t["predicted_by"] is None for t in journaled)
    lane = server.lane()
    again = await SweepRun(spec, [lane], journal=Journal(path, spec)).run()
    assert lane.starts == 0  # every real trial replayed, the twin ranked again
    assert again.best is not None and first.best is not None
    assert again.best.params == first.best.params
    assert again.resumed == first.starts


class StatedTwin:
    """A cold profile twin that states a fixed error (a profile's measured one)."""

    def __init__(self, inner: ProfileTwin, error: float) -> None:
        self._inner, self._error = inner, error

    @property
    def label(self) -> str:
        return self._inner.label

    @property
    def stated_error(self) -> float | None:
        return self._error

    @property
    def fitted(self) -> bool:
        return self._inner.fitted

    def lane(self) -> Lane:
        return self._inner.lane()

    async def refit(self, observations: Sequence[TwinObservation]) -> None:
        await self._inner.refit(observations)

    def calibration_loads(self, load):  # type: ignore[no-untyped-def]
        return self._inner.calibration_loads(load)


async def test_a_larger_stated_error_measures_more_before_it_stops(server: HiddenServer) -> None:
    spec = server.spec(
        parameters={"max_num_seqs": [4, 8, 16, 32], "max_num_batched_tokens": [256, 1024]}
    )
    starts = []
    for error in (0.0, 0.25):
        twin = StatedTwin(ProfileTwin(cold_profile(spec.base.flags_for({}))), error)
        status = await SweepRun(spec, [server.lane()], twin=twin).run()
        starts.append(status.starts)
        if error:
            assert "error of 25.0%" in status.notes[-1]
    assert starts[0] < starts[1]


async def test_the_budget_of_starts_bounds_it(server: HiddenServer) -> None:
    status = await SweepRun(
        server.spec(budget={"max_starts": 1}, twin={"tolerance": 0.0}),
        [server.lane()],
        twin=StatedTwin(ProfileTwin(cold_profile(server.spec().base.flags_for({}))), 0.5),
    ).run()
    assert status.starts == 1
    assert "budget of 1 starts spent" in status.message


async def test_a_refit_makes_a_new_revision_with_a_measured_error(server: HiddenServer) -> None:
    spec = server.spec()
    flags = spec.base.flags_for({"max_num_seqs": 8})
    twin = ProfileTwin(cold_profile(spec.base.flags_for({})))
    assert twin.cold and twin.stated_error is None and "not fitted yet" in twin.label
    real = server.lane()
    await real.start(flags, SweepTag(sweep_id="t", trial=1))
    observations = []
    for load in twin.calibration_loads(spec.workload.load):
        run = await real.bench(load, model=None, goodput={})
        metrics = {
            k: float(v)
            for k in (
                "output_throughput",
                "completed",
                "mean_ttft_ms",
                "mean_tpot_ms",
                "mean_e2el_ms",
            )
            if (v := run.result.metric(k)) is not None
        }
        observations.append(TwinObservation(flags, load, metrics))
    await twin.refit(observations)
    assert not twin.cold and twin.profile.revision == 2
    assert twin.stated_error is not None and twin.stated_error < 0.1
    assert twin.label.startswith("predicted (twin sweep-cold r2, ±")


async def test_a_catalogue_twin_is_scaled_to_the_real_numbers() -> None:
    model = "meta-llama/Llama-3.1-8B-Instruct"
    from tui.domain.flags.serve import ServeFlags
    from tui.domain.workload import LoadSpec

    flags = ServeFlags(model=model, max_model_len=4096, max_num_seqs=64)
    load = LoadSpec(input_len=256, output_len=64, num_prompts=32, max_concurrency=None)
    real = WhatIfLane(["--sim-gpu", "a100-80gb"])
    await real.start(flags, SweepTag(sweep_id="t", trial=1))
    measured = (await real.bench(load, model=None, goodput={})).result
    twin = catalogue_twin("l4-24gb")
    assert isinstance(twin, WhatIfTwin) and "hand-made" in twin.label
    keys = ("output_throughput", "mean_ttft_ms", "p99_itl_ms")
    observed = {k: float(v) for k in keys if (v := measured.metric(k)) is not None}
    await twin.refit([TwinObservation(flags, load, observed)])
    lane = twin.lane()
    await lane.start(flags, SweepTag(sweep_id="t", trial=2))
    predicted = (await lane.bench(load, model=None, goodput={})).result
    for key in keys:
        assert predicted.metric(key) == pytest.approx(measured.metric(key), rel=1e-6)
    # One trial: nothing left out to score the correction by; it says so.
    assert "scaled to 1 real trial, not validated" in twin.label and twin.stated_error is None


def test_the_catalogue_twins_correction_is_scored_on_trials_it_left_out() -> None:
    from tui.tune.twin import held_out_error

    # Three trials 10 % apart in log terms: each predicted by the others' mean misses.
    logs = {"output_throughput": [0.0, 0.1, 0.2]}
    error = held_out_error(logs)
    assert error is not None and error == pytest.approx(math.expm1(0.15), rel=0.2)
    assert held_out_error({"output_throughput": [0.3]}) is None  # one trial: unscored


async def test_a_space_nothing_can_start_in_fails_with_why(server: HiddenServer) -> None:
    spec = server.spec(parameters={"max_num_seqs": [512], "max_num_batched_tokens": [256]})
    status = await SweepRun(spec, [server.lane()]).run()
    assert status.state is SweepState.FAILED
    assert "nothing in the space can start" in status.message
    (pruned,) = status.trials
    assert pruned.state is TrialState.PRUNED and "max_num_seqs (512)" in pruned.diagnosis


def test_a_profile_of_another_model_is_marked_in_every_prediction(tmp_path: Path) -> None:
    from tests.fakes.profiles import cpu_profile

    profile = cpu_profile(tmp_path / "m", name="elsewhere")
    same = ProfileTwin(profile, model=profile.identity.model)
    other = ProfileTwin(profile, model="Qwen/Qwen2.5-0.5B-Instruct")
    assert same.label == profile.label()
    # One label: the caveat inside it, as every other prediction of another server.
    assert other.label.startswith(profile.label().removesuffix(")"))
    assert "; profile of another server: model Qwen/Qwen2.5-0.5B-Instruct (profile: " in other.label
