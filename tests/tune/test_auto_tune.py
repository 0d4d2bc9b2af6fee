"""auto_tune.sh step for step: the utilization probe, rate inf, the descent, result.txt."""

from __future__ import annotations

import itertools
import math

import pytest
from fakes.sweep_lanes import ScriptedLane, saturating

from tui.domain.sweep import SweepSpec, SweepState, TrialState
from tui.tune.report import result_txt
from tui.tune.run import SweepRun


def spec(**changes: object) -> SweepSpec:
    data: dict[str, object] = {
        "name": "at",
        "strategy": "auto_tune",
        "objective": "request_throughput",
        "base": {"model": "m", "flags": {"max_model_len": 4096, "enable_prefix_caching": True}},
        "parameters": {"max_num_seqs": [128, 256], "max_num_batched_tokens": [4096, 8192]},
        "workload": {"input_len": 128, "output_len": 384, "cache_hit_pct": 30},
        "slo": {"p99_e2el_ms": 13000},
        "auto_tune": {"first_prompts": 1000, "descent_prompts": 100},
    }
    data.update(changes)
    return SweepSpec.model_validate(data)


def refuses_above(util: float):  # type: ignore[no-untyped-def]
    return lambda f: "insufficient_free_memory" if (f.gpu_memory_utilization or 0) > util else None


async def test_the_probe_walks_down_from_098_with_the_last_pair_then_every_pair_uses_it() -> None:
    lane = ScriptedLane(fails=refuses_above(0.955), model=saturating(200.0))
    s = spec(parameters={"max_num_seqs": [256, 128], "max_num_batched_tokens": [8192, 4096]})
    status = await SweepRun(s, [lane]).run()
    probes = [f for f in lane.starts[:4]]
    assert [p.gpu_memory_utilization for p in probes] == [0.98, 0.97, 0.96, 0.95]
    # auto_tune.sh probes with ${list[-1]}: the last values, whatever their order
    assert all((p.max_num_seqs, p.max_num_batched_tokens) == (128, 4096) for p in probes)
    pairs = lane.starts[4:]
    assert len(pairs) == 4 and all(p.gpu_memory_utilization == 0.95 for p in pairs)
    assert all(p.enable_prefix_caching for p in pairs)
    assert "Using gpu_memory_utilization=0.95 to serve model." in status.notes
    assert [t.state for t in status.trials[:4]] == [TrialState.FAILED_START] * 3 + [TrialState.UP]


async def test_each_pair_runs_rate_inf_with_the_shared_prefix_then_descends_by_one() -> None:
    lane = ScriptedLane(model=saturating(37.6, base_e2el_ms=9000))  # at inf: 1000/37.6 s queue
    status = await SweepRun(
        spec(parameters={"max_num_seqs": [128], "max_num_batched_tokens": [4096]}), [lane]
    ).run()
    loads = [load for _, load in lane.benches]
    first = loads[0]
    assert math.isinf(first.request_rate) and first.num_prompts == 1000
    assert (first.prefix_len, first.input_len) == (38, 90)
    rates = [load.request_rate for load in loads[1:]]
    assert rates[0] == 38  # int(37.6) + 1
    assert all(b - a == -1 for a, b in itertools.pairwise(rates))
    assert all(load.num_prompts == 100 for load in loads[1:])
    assert lane.resets == len(rates)  # the prefix cache is emptied before every step
    best = status.best
    assert best is not None and best.slo_met
    assert best.measurement is not None and best.measurement.rate == str(int(rates[-1]))


async def test_none_starting_ends_with_the_scripts_message() -> None:
    lane = ScriptedLane(fails=refuses_above(0.5))
    status = await SweepRun(spec(), [lane]).run()
    assert status.state is SweepState.FAILED
    assert "Cannot find a proper gpu_memory_utilization over 0.9" in status.message
    assert len(lane.starts) == 9  # 0.98 down to 0.90


async def test_result_txt_has_the_scripts_lines() -> None:
    def model(flags, load):  # type: ignore[no-untyped-def]
        if flags.max_num_seqs == 256:
            return 5.0, 99_000.0  # never meets the limit, even at 1 req/s
        return saturating(20.0, base_e2el_ms=1000)(flags, load)

    lane = ScriptedLane(model=model)
    s = spec(parameters={"max_num_seqs": [128, 256], "max_num_batched_tokens": [4096]})
    status = await SweepRun(s, [lane]).run()
    text = result_txt(status, s, "vllm 0.32.0").splitlines()
    assert text[0] == "hash:vllm 0.32.0"
    assert text[1].startswith("max_num_seqs: 128, max_num_batched_tokens: 4096, request_rate: ")
    assert ", e2el: " in text[1] and ", throughput: " in text[1] and ", goodput: " in text[1]
    assert (
        text[2]
        == "max_num_seqs: 256, max_num_batched_tokens: 4096 does not meet latency requirement 13000"
    )
    assert text[3].startswith(
        "best_max_num_seqs: 128, best_num_batched_tokens: 4096, best_throughput: "
    )
    assert text[3].endswith("profile saved in: ")


@pytest.mark.parametrize("missing", ["max_num_seqs", "max_num_batched_tokens"])
def test_auto_tune_needs_both_lists(missing: str) -> None:
    params = {"max_num_seqs": [128], "max_num_batched_tokens": [4096]}
    del params[missing]
    with pytest.raises(ValueError, match=missing):
        spec(parameters=params)
