"""The trial loop: parallel lanes, the journal (resume without repeating), budget, stopping."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.sweep_lanes import Gate, ScriptedLane, saturating

from tui.domain.sweep import SweepSpec, SweepState, TrialState
from tui.tune.journal import Journal, journal_path, list_journals
from tui.tune.run import SweepRun


def grid_spec(**changes: object) -> SweepSpec:
    data: dict[str, object] = {
        "name": "ctx",
        "strategy": "grid",
        "objective": "request_throughput",
        "base": {"model": "m"},
        "parameters": {"max_num_seqs": [64, 128, 256], "max_num_batched_tokens": [2048, 4096]},
        "workload": {"input_len": 32, "output_len": 16, "num_prompts": 40},
        "slo": {"p99_e2el_ms": 30000},
    }
    data.update(changes)
    return SweepSpec.model_validate(data)


def by_seqs(flags_seqs: dict[int, float]) -> object:
    return lambda flags, load: saturating(flags_seqs[flags.max_num_seqs or 0])(flags, load)


async def test_trials_run_one_per_lane_in_parallel_each_tagged_and_pinned() -> None:
    gate = Gate(width=2)
    lanes = [ScriptedLane(name="gpu0", gate=gate), ScriptedLane(name="gpu1", gate=gate)]
    status = await SweepRun(grid_spec(), lanes).run()
    assert status.state is SweepState.DONE and status.starts == 6
    assert gate.peak == 2  # two starts were in flight at once: one per lane
    assert all(lane.starts for lane in lanes)
    assert {t.lane for t in status.trials} == {"gpu0", "gpu1"}
    tags = sorted(tag.trial for lane in lanes for tag in lane.tags)
    assert tags == [t.index for t in status.trials]
    assert all(tag.sweep_id == grid_spec().sweep_id() for lane in lanes for tag in lane.tags)


async def test_a_resumed_sweep_replays_finished_trials_without_starting_them(
    tmp_path: Path,
) -> None:
    spec = grid_spec()
    path = journal_path(tmp_path, spec.sweep_id())
    first = ScriptedLane(interrupt_on_bench=3)  # the third benchmark is cut short: a stop
    stopped = await SweepRun(spec, [first], journal=Journal(path, spec)).run()
    assert stopped.state is SweepState.STOPPED
    assert stopped.done == 2  # the interrupted trial is not recorded as finished
    again = ScriptedLane()
    resumed = await SweepRun(spec, [again], journal=Journal(path, spec)).run()
    assert resumed.state is SweepState.DONE and resumed.resumed == 2
    assert len(again.starts) == 4  # 6 trials, 2 replayed from the journal
    replayed = {(f.max_num_seqs, f.max_num_batched_tokens) for f in first.starts[:2]}
    assert not replayed & {(f.max_num_seqs, f.max_num_batched_tokens) for f in again.starts}
    assert [t.index for t in resumed.trials] == [1, 2, 3, 4, 5, 6]
    (summary,) = list_journals(tmp_path)
    assert summary.done and summary.trials == 6


async def test_the_budget_of_starts_ends_the_sweep() -> None:
    spec = grid_spec(budget={"max_starts": 3})
    lane = ScriptedLane()
    status = await SweepRun(spec, [lane]).run()
    assert status.state is SweepState.DONE and "budget" in status.message
    assert len(lane.starts) == 3 == status.starts


async def test_a_stop_cuts_the_running_trial_and_aborts_its_lane() -> None:
    spec = grid_spec()
    lane = ScriptedLane()
    run = SweepRun(spec, [lane])
    original = lane.bench

    async def stop_during_bench(load, *, model, goodput):  # type: ignore[no-untyped-def]
        if len(lane.benches) == 1:
            run.stop()
        return await original(load, model=model, goodput=goodput)

    lane.bench = stop_during_bench  # type: ignore[method-assign]
    status = await run.run()
    assert status.state is SweepState.STOPPED
    assert lane.aborted == 1
    assert len(lane.starts) == 2  # the one in flight finished its benchmark; no next start


async def test_failed_starts_carry_their_diagnosis_and_the_best_meets_the_slos() -> None:
    spec = grid_spec()
    lane = ScriptedLane(
        fails=lambda f: "kv_cache_too_small" if f.max_num_seqs == 256 else None,
        model=by_seqs({64: 5.0, 128: 9.0}),  # type: ignore[arg-type]
    )
    status = await SweepRun(spec, [lane]).run()
    failed = [t for t in status.trials if t.state is TrialState.FAILED_START]
    assert len(failed) == 2 and status.failed_starts == 2
    assert all(t.diagnosis_kind == "kv_cache_too_small" for t in failed)
    assert status.best is not None and status.best.params["max_num_seqs"] == 128
    assert status.best.slo_met


@pytest.mark.parametrize("strategy", ["grid", "search"])
async def test_flag_rule_refusals_are_never_started(strategy: str) -> None:
    spec = grid_spec(
        strategy=strategy,
        parameters={"max_num_seqs": [64, 512], "max_num_batched_tokens": [256, 4096]},
        search={"startup_trials": 1, "confirm_seeds": 1},
    )
    lane = ScriptedLane()
    status = await SweepRun(spec, [lane]).run()
    assert all((f.max_num_batched_tokens or 0) >= (f.max_num_seqs or 0) for f in lane.starts)
    if strategy == "grid":
        pruned = [t for t in status.trials if t.state is TrialState.PRUNED]
        assert len(pruned) == 1 and "flag rules" in pruned[0].diagnosis


async def test_identical_failures_in_a_row_stop_the_sweep_with_the_reason() -> None:
    """Issue 17: pairs kept starting after four identical failures."""
    lane = ScriptedLane(fails=lambda f: "insufficient_free_memory")
    status = await SweepRun(grid_spec(), [lane]).run()
    assert status.state is SweepState.FAILED
    assert len(lane.starts) == 3  # no fourth start
    assert "3 trials in a row failed the same way (insufficient_free_memory)" in status.message
    assert "scripted insufficient_free_memory" in status.message


async def test_a_failure_streak_one_parameter_value_explains_goes_on() -> None:
    """A grid row of one value that cannot start (every batched size at 256 sequences) is
    that value's doing, not the machine's: the sweep goes on past it."""
    spec = grid_spec(
        parameters={"max_num_seqs": [256, 64], "max_num_batched_tokens": [2048, 4096, 8192]}
    )
    lane = ScriptedLane(fails=lambda f: "kv_cache_too_small" if f.max_num_seqs == 256 else None)
    status = await SweepRun(spec, [lane]).run()
    assert status.state is SweepState.DONE and len(lane.starts) == 6
    assert status.failed_starts == 3


async def test_a_stop_between_two_loads_of_a_trial_runs_no_further_load() -> None:
    """x after a trial's first load and before its next: no load (nor trial) after it."""
    spec = grid_spec(
        strategy="auto_tune",
        parameters={"max_num_seqs": [64], "max_num_batched_tokens": [2048]},
        auto_tune={
            "probe_start": 0.9,
            "probe_stop": 0.9,
            "first_prompts": 40,
            "descent_prompts": 10,
        },
    )
    lane = ScriptedLane(model=saturating(1.0, base_e2el_ms=50000.0))  # misses the SLO: descent
    run = SweepRun(spec, [lane])
    original = lane.bench

    async def stop_after_first(load, *, model, goodput):  # type: ignore[no-untyped-def]
        result = await original(load, model=model, goodput=goodput)
        if len(lane.benches) == 1:
            run.stop()  # the load already finished: only the next one can be refused
        return result

    lane.bench = stop_after_first  # type: ignore[method-assign]
    status = await run.run()
    assert status.state is SweepState.STOPPED
    assert len(lane.benches) == 1


async def test_a_sweep_without_slos_says_none_were_set() -> None:
    """Issue 39: the sweep screen said "none met the SLOs yet (none)" with no SLOs set."""
    bounded = await SweepRun(grid_spec(budget={"max_starts": 1}), [ScriptedLane(name="gpu0")]).run()
    assert bounded.slo == "p99_e2el_ms <= 30000"
    free = await SweepRun(
        grid_spec(slo={}, budget={"max_starts": 1}), [ScriptedLane(name="gpu0")]
    ).run()
    assert free.slo == ""
