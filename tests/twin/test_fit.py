"""The twin's runtime: the load generator's arrivals, the step model's terms, the server's
own counts as rows and as a check, a refit that scores itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.profiles import KNOWN, cpu_profile, twin_samples

from tui.domain.prediction import ErrorSource, TwinMetric
from tui.domain.profile import COEFFICIENTS, StepCoefficients
from tui.domain.workload import LoadSpec
from tui.load.arrivals import send_times
from tui.sim.costmodel import StepWork
from tui.sim.twin import step_features, twin_config
from tui.sim.twin_load import LoadShape, build_requests, run_twin_load
from tui.twin.fit import FitRecipe, fit_profile, step_check
from tui.twin.predict import predict
from tui.twin.validation import refit


@pytest.fixture
def profile(tmp_path: Path):  # type: ignore[no-untyped-def]
    return cpu_profile(tmp_path / "tiny")


@pytest.mark.parametrize("burstiness", [1.0, 0.5, 4.0])
def test_the_twin_sends_at_the_load_generators_own_times(burstiness: float) -> None:
    load = LoadSpec(input_len=8, output_len=4, num_prompts=40, request_rate=7.0, seed=3)
    load = load.model_copy(update={"burstiness": burstiness})
    _, times = build_requests(LoadShape.of(load))
    assert times == send_times(40, 7.0, burstiness, 3)  # the one function, rescaled to N/rate
    assert times[-1] == pytest.approx(40 / 7.0)


def test_decode_attention_prefill_pairs_and_sequences_are_separate_terms() -> None:
    # Two decodes reading 300 and 500 KV tokens, one 100-token prefill chunk after 50 cached.
    pairs = 300 + 500 + (100 * 50 + 100 * 101 // 2)
    work = StepWork(
        prefill_tokens=100,
        decode_seqs=2,
        context_tokens=950,
        attention_pairs=pairs,
        decode_context_tokens=800,
        num_seqs=3,
        sampled_seqs=2,
    )
    f = dict(zip(COEFFICIENTS, step_features(work, 1, 64, blocking=True), strict=True))
    assert f["b3"] == pytest.approx(0.8) and f["b4"] == pytest.approx(10050 / 1e6)
    assert (f["b0"], f["b1"], f["b2"], f["b5"]) == (1.0, 100.0, 2.0, 3.0)
    assert (f["a0"], f["a1"], f["a2"]) == (1.0, 64.0, 2.0)  # the API server on the same cores
    beside = dict(zip(COEFFICIENTS, step_features(work, 1, 64), strict=True))
    assert (beside["a0"], beside["a1"], beside["a2"]) == (0.0, 0.0, 0.0)
    assert step_features(StepWork()) == (0.0,) * len(COEFFICIENTS)


def test_an_api_server_on_the_engines_cores_slows_every_step(profile) -> None:  # type: ignore[no-untyped-def]
    load = LoadSpec(input_len=32, output_len=32, num_prompts=16, max_concurrency=8)
    costly = profile.model_copy(
        update={"coefficients": KNOWN.model_copy(update={"a2": 0.002, "a0": 0.01})}
    )
    shared = predict(costly, costly.flags, load)
    apart = predict(costly.model_copy(update={"frontend_blocks": False}), costly.flags, load)
    assert shared.output_throughput and apart.output_throughput
    assert shared.output_throughput < 0.8 * apart.output_throughput
    assert shared.mean_tpot_ms and apart.mean_tpot_ms
    assert shared.mean_tpot_ms > apart.mean_tpot_ms + 1.5  # two ms a token, streamed


def test_the_servers_own_phase_times_are_rows_that_find_the_engine(profile) -> None:  # type: ignore[no-untyped-def]
    samples = twin_samples(profile)
    start = profile.model_copy(update={"coefficients": StepCoefficients()})
    fitted = fit_profile(start, samples)
    got = fitted.coefficients
    for name in ("b0", "a0"):
        assert getattr(got, name) == pytest.approx(getattr(KNOWN, name), rel=0.1)
    # A decode step's sequence, its token and the token it streams come together: their sum
    # is what the loads tell apart (a mixed step alone separates them).
    assert got.b2 + got.b5 + got.a2 == pytest.approx(KNOWN.b2 + KNOWN.b5 + KNOWN.a2, rel=0.05)
    # One long-prompt load: its tokens and its attention pairs share the prefill's time.
    assert fitted.coefficients.b1 == pytest.approx(KNOWN.b1, rel=0.15)
    assert fitted.fit_error.median_pct < 1.0
    # The client's means alone still fit (a server without the histograms).
    bare = fit_profile(start, twin_samples(profile, server=False), FitRecipe(server_rows=False))
    assert bare.fit_error.median_pct < 2.0


def test_the_step_count_is_checked_against_the_servers_own(profile) -> None:  # type: ignore[no-untyped-def]
    samples = twin_samples(profile)
    same = step_check(profile, samples)
    assert same is not None and same.loads == len(samples) and same.worst_pct == 0.0
    # A server that took twice the steps on one load: a scheduler error, named.
    off = samples[1].model_copy(update={"server_steps": None, "server": None})
    assert samples[1].server is not None and samples[1].server.steps
    doubled = samples[1].server.model_copy(update={"steps": 2 * samples[1].server.steps})
    off = off.model_copy(update={"server": doubled})
    check = step_check(profile, [samples[0], off])
    assert check is not None and check.worst_pct == pytest.approx(50.0, abs=1.0)
    assert check.worst_load == samples[1].name and "worst 50" in check.line()


def test_a_refit_scores_itself_or_says_it_is_not_validated(profile) -> None:  # type: ignore[no-untyped-def]
    samples = twin_samples(profile)
    scored = refit(profile, samples, [samples[-1].name])
    assert scored.validation is not None and scored.validation.source is ErrorSource.VALIDATION
    pred = predict(scored, scored.flags, samples[0].load)
    assert pred.interval(TwinMetric.OUTPUT_THROUGHPUT) is not None
    unscored = refit(profile, samples, [])
    assert unscored.validation is None and "fit only" in unscored.label()
    pred = predict(unscored, unscored.flags, samples[0].load)
    assert pred.interval(TwinMetric.OUTPUT_THROUGHPUT) is None
    assert "(not validated)" in pred.line()


def test_the_simulators_twin_cost_charges_the_same_features(profile) -> None:  # type: ignore[no-untyped-def]
    # `vtc-sim serve --sim-profile` and predict() share the intake: each request's own
    # wait, and on a CPU server its work in the next step.
    from tui.sim.costmodel import CostModel
    from tui.sim.twin import TwinCost

    base = CostModel(
        weight_bytes=1.0,
        offloaded_bytes=0.0,
        kv_bytes_per_token=1.0,
        active_params=1.0,
        attn_flops_per_pair=1.0,
        bandwidth=1.0,
        peak_flops=1.0,
        host_link=1.0,
        num_layers=1,
        enforce_eager=True,
    )
    cost = TwinCost.of(base, profile)
    assert cost.admit_delay(64) == pytest.approx(KNOWN.a0 + 64 * KNOWN.a1)
    work = StepWork(prefill_tokens=64, num_seqs=1, sampled_seqs=1, attention_pairs=64 * 65 // 2)
    expected = KNOWN.seconds(step_features(work, 1, 64, blocking=True))
    assert cost.step_time(work) == pytest.approx(expected)
    assert cost.step_time(work) < expected  # the intake was charged once


def test_every_step_of_a_trace_has_the_profiles_features(profile) -> None:  # type: ignore[no-untyped-def]
    config = twin_config(profile, profile.flags).config
    assert config is not None
    shape = LoadShape.of(LoadSpec(input_len=64, output_len=16, num_prompts=12, max_concurrency=4))
    trace = run_twin_load(config, profile.coefficients, shape, blocking=True)
    assert trace.steps and all(len(s) == len(COEFFICIENTS) for s in trace.steps)
    intake = COEFFICIENTS.index("a0")
    assert sum(s[intake] for s in trace.steps) == 12  # every request's intake charged once


def test_a_profile_of_another_vllm_says_so_even_on_the_simulator(profile) -> None:  # type: ignore[no-untyped-def]
    from fakes.runs import served_run

    from tui.domain.results import Reproduction

    load = LoadSpec(input_len=32, output_len=8, num_prompts=4)
    same = Reproduction(vllm_version="0.32.0+cpu", gpu_name="NVIDIA L4 (simulated)")
    run = served_run(1, repro=same, model=profile.flags.model)
    assert predict(profile, profile.flags, load, run).caveat == ""
    other = same.model_copy(update={"vllm_version": "0.33.0"})
    run = served_run(1, repro=other, model=profile.flags.model)
    caveat = predict(profile, profile.flags, load, run).caveat
    assert caveat == "vLLM 0.33.0 (profile: 0.32.0)"


async def test_a_sweeps_twin_lane_holds_its_profile_in_memory_and_predicts_as_the_console(  # type: ignore[no-untyped-def]
    profile,
) -> None:
    from tui.domain.results import SweepTag
    from tui.tune.twin_profile import ProfileTwin

    twin = ProfileTwin(profile)
    lane = twin.lane()
    started = await lane.start(profile.flags, SweepTag(sweep_id="s", trial=1))
    assert started.ok and started.kv_tokens == predict(profile, profile.flags, LoadSpec()).kv_tokens
    load = LoadSpec(input_len=32, output_len=16, num_prompts=12, max_concurrency=4)
    run = await lane.bench(load, model=None, goodput={})
    console = predict(profile, profile.flags, load)
    assert run.result.output_throughput == pytest.approx(console.metric("output_throughput"))
    small = profile.flags.model_copy(update={"kv_cache_memory_bytes": 2**20})
    refused = await lane.start(small, SweepTag(sweep_id="s", trial=2))
    assert not refused.ok and refused.diagnosis


def test_the_servers_counters_around_a_load_give_its_steps_and_phase_means() -> None:
    from tui.twin.calibrate import server_side

    before = {"steps": 100.0, "queue_sum": 1.0, "queue_count": 10.0, "prefill_sum": 2.0}
    before |= {"prefill_count": 10.0, "decode_sum": 5.0, "decode_count": 10.0}
    after = {"steps": 160.0, "queue_sum": 1.4, "queue_count": 14.0, "prefill_sum": 2.8}
    after |= {"prefill_count": 14.0, "decode_sum": 7.0, "decode_count": 14.0}
    side = server_side(before, after)
    assert side.steps == 60 and side.requests == 4
    assert side.queue_s == pytest.approx(0.1) and side.prefill_s == pytest.approx(0.2)
    assert side.decode_s == pytest.approx(0.5)
    # A server without the histograms (or no page): what it did not say stays unknown.
    bare = server_side({"steps": 1.0}, {"steps": 9.0})
    assert bare.steps == 8 and bare.queue_s is None and bare.decode_s is None
    assert server_side(None, after).steps is None
