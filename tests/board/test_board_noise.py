"""Like for like and noise, tested as properties of the rule (noise.py's docstring)."""

from __future__ import annotations

from fakes.runs import served_run
from hypothesis import given, settings
from hypothesis import strategies as st
from property_profiles import examples

from tui.domain.board.metrics import OUTPUT_THROUGHPUT, TTFT_P99
from tui.domain.board.noise import (
    NOISE_FLOOR_PCT,
    Groups,
    Spread,
    Verdict,
    compare,
    like_for_like,
    percent_change,
)
from tui.domain.results import Reproduction
from tui.domain.workload import LoadSpec

values = st.floats(min_value=1.0, max_value=1e5, allow_nan=False, allow_infinity=False)
samples = st.lists(values, min_size=1, max_size=5)


def _repeats(first_id: int, tputs: list[float], **flags: object) -> list:
    return [served_run(first_id + i, tput=t, **flags) for i, t in enumerate(tputs)]


@given(a=values, b=values)
def test_runs_with_identical_flags_and_workload_never_show_a_gain(a: float, b: float) -> None:
    base, other = served_run(1, tput=a, max_num_seqs=256), served_run(2, tput=b, max_num_seqs=256)
    result = compare(OUTPUT_THROUGHPUT, other, base, Groups([base, other]))
    assert result.verdict in (Verdict.NOISE,)


@settings(max_examples=examples(60))
@given(mine=samples, theirs=samples)
def test_the_verdict_follows_the_overlap_of_the_two_spreads(
    mine: list[float], theirs: list[float]
) -> None:
    base = _repeats(1, theirs, max_num_seqs=256)
    new = _repeats(100, mine, max_num_seqs=512)
    groups = Groups([*base, *new])
    overlap = Spread.of(mine).overlaps(Spread.of(theirs))  # type: ignore[union-attr]
    band = groups.band(OUTPUT_THROUGHPUT)
    for run in new:
        result = compare(OUTPUT_THROUGHPUT, run, base[0], groups)
        change = percent_change(run.bench.output_throughput, theirs[0])
        if overlap or (change is not None and abs(change) <= band):
            assert result.verdict is Verdict.NOISE
        else:
            expected = Verdict.GAIN if min(mine) > max(theirs) else Verdict.LOSS
            assert result.verdict is expected
        assert result.confirmed == (len(mine) > 1 and len(theirs) > 1)


@settings(max_examples=examples(60))
@given(mine=samples, theirs=samples, extra=values)
def test_a_repeat_can_turn_a_gain_into_noise_never_noise_into_a_gain(
    mine: list[float], theirs: list[float], extra: float
) -> None:
    base = _repeats(1, theirs, max_num_seqs=256)
    new = _repeats(100, mine, max_num_seqs=512)
    before = compare(OUTPUT_THROUGHPUT, new[0], base[0], Groups([*base, *new]))
    repeat = served_run(200, tput=extra, max_num_seqs=512)
    after = compare(OUTPUT_THROUGHPUT, new[0], base[0], Groups([*base, *new, repeat]))
    if before.verdict is Verdict.NOISE:
        assert after.verdict is Verdict.NOISE


@given(a=values, b=values, scale=st.floats(min_value=1e-3, max_value=1e3))
def test_verdicts_do_not_depend_on_units_and_noise_is_symmetric(
    a: float, b: float, scale: float
) -> None:
    x, y = served_run(1, tput=a, max_num_seqs=256), served_run(2, tput=b, max_num_seqs=512)
    xs, ys = (
        served_run(1, tput=a * scale, max_num_seqs=256),
        served_run(2, tput=b * scale, max_num_seqs=512),
    )
    plain = compare(OUTPUT_THROUGHPUT, y, x, Groups([x, y])).verdict
    scaled = compare(OUTPUT_THROUGHPUT, ys, xs, Groups([xs, ys])).verdict
    assert plain is scaled
    back = compare(OUTPUT_THROUGHPUT, x, y, Groups([x, y])).verdict
    assert (plain is Verdict.NOISE) == (back is Verdict.NOISE)


@given(a=values, b=values)
def test_direction_follows_the_metric(a: float, b: float) -> None:
    base = served_run(1, tput=a, ttft_p99=a, max_num_seqs=256)
    run = served_run(2, tput=b, ttft_p99=b, max_num_seqs=512)
    groups = Groups([base, run])
    tput, ttft = compare(OUTPUT_THROUGHPUT, run, base, groups), compare(TTFT_P99, run, base, groups)
    change = percent_change(b, a)
    if change is None or abs(change) <= NOISE_FLOOR_PCT:
        assert tput.verdict is ttft.verdict is Verdict.NOISE
    else:  # more throughput is a gain; more latency is a loss
        assert {tput.verdict, ttft.verdict} == {Verdict.GAIN, Verdict.LOSS}


def test_different_workloads_are_marked_and_never_a_gain() -> None:
    base = served_run(1, tput=100, workload=LoadSpec(num_prompts=32))
    run = served_run(2, tput=1000, workload=LoadSpec(num_prompts=200), max_num_seqs=512)
    verdict = like_for_like(run, base)
    assert not verdict.ok and verdict.reasons == ("other workload: prompts 200 vs 32",)
    result = compare(OUTPUT_THROUGHPUT, run, base, Groups([base, run]))
    assert result.verdict is Verdict.OTHER_LOAD and result.percent == 900.0


def test_a_different_machine_is_not_like_for_like_but_an_unknown_one_is_not_held_against() -> None:
    a = served_run(1, repro=Reproduction(gpu_name="NVIDIA A100", vllm_version="0.32.0"))
    b = served_run(2, repro=Reproduction(gpu_name="NVIDIA H100", vllm_version="0.32.0"))
    c = served_run(3, repro=Reproduction(gpu_name=None, vllm_version="0.32.0"))
    assert like_for_like(a, b).reasons == ("other machine: GPU NVIDIA A100 vs NVIDIA H100",)
    assert like_for_like(a, c).ok and like_for_like(a, served_run(4)).ok


def test_server_address_flags_do_not_split_a_group() -> None:
    a, b = served_run(1, port=8001), served_run(2, port=8002, host="0.0.0.0")
    assert len(Groups([a, b]).members(a)) == 2


def test_a_change_inside_the_noise_floor_is_noise_even_between_single_runs() -> None:
    """Issue 39: TTFT p99 0.4% lower was green like a real gain."""
    base = served_run(1, tput=1000.0, ttft_p99=100.0, max_num_seqs=256)
    run = served_run(2, tput=1300.0, ttft_p99=99.6, max_num_seqs=512)
    groups = Groups([base, run])
    assert compare(TTFT_P99, run, base, groups).verdict is Verdict.NOISE
    assert compare(OUTPUT_THROUGHPUT, run, base, groups).verdict is Verdict.GAIN


def test_the_band_widens_to_the_widest_spread_the_repeats_have_shown() -> None:
    base = served_run(1, tput=1000.0, max_num_seqs=256)
    repeats = [
        served_run(2, tput=900.0, max_num_seqs=128),
        served_run(3, tput=1000.0, max_num_seqs=128),
    ]
    run = served_run(4, tput=1080.0, max_num_seqs=512)
    alone = Groups([base, run])
    measured = Groups([base, *repeats, run])
    assert alone.band(OUTPUT_THROUGHPUT) == NOISE_FLOOR_PCT
    assert measured.band(OUTPUT_THROUGHPUT) == 10.0  # 900..1000: 10% of 1000
    assert compare(OUTPUT_THROUGHPUT, run, base, alone).verdict is Verdict.GAIN
    assert compare(OUTPUT_THROUGHPUT, run, base, measured).verdict is Verdict.NOISE
