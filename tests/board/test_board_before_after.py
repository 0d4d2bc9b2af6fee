"""Seed 003's Before / After: both values, the change in the seed's words, noise marked."""

from __future__ import annotations

from fakes.runs import served_run
from hypothesis import given
from hypothesis import strategies as st

from tui.domain.board.before_after import before_after, change_words
from tui.domain.board.metrics import REQUEST_THROUGHPUT, TTFT_MEAN
from tui.domain.board.render import before_after_markdown
from tui.domain.workload import LoadSpec


@given(percent=st.floats(min_value=-99, max_value=1000, allow_nan=False))
def test_change_words_follow_the_metric_direction(percent: float) -> None:
    latency, rate = change_words(TTFT_MEAN, percent), change_words(REQUEST_THROUGHPUT, percent)
    if round(percent, 1) == 0:
        assert latency == rate == "no change"
    elif percent < 0:
        assert latency.endswith("faster") and rate.endswith("decrease")
    else:
        assert latency.endswith("slower") and rate.endswith("increase")


def test_seed_003_shape_with_both_values_and_the_change() -> None:
    before = served_run(1, tput=660, ttft_p99=7210, max_num_seqs=256)
    after = served_run(2, tput=1247, ttft_p99=2250, max_num_seqs=512, max_num_batched_tokens=4096)
    ba = before_after(before, after)
    text = before_after_markdown(ba)
    lines = text.splitlines()
    assert lines[0] == "| Metric | Before (#1) | After (#2) | Improvement |"
    p99 = next(line for line in lines if "TTFT p99" in line)
    assert "7.21 s" in p99 and "2.25 s" in p99 and "68.8% faster" in p99
    rate = next(line for line in lines if "req/s" in line)
    assert "88.9% increase" in rate
    assert "`max_num_seqs` 256 → 512" in text and "`max_num_batched_tokens`" in text


def test_a_repeat_reads_as_noise_and_other_loads_are_called_out() -> None:
    a, b = served_run(1, tput=800), served_run(2, tput=1040)
    text = before_after_markdown(before_after(a, b))
    assert "30.0% increase (noise)" in text and "a repeat" in text
    c = served_run(3, tput=1040, workload=LoadSpec(num_prompts=200))
    text = before_after_markdown(before_after(a, c))
    assert "(other load)" in text and "Not like for like: other workload: prompts 64 vs 200" in text
