"""The random workload (ref section 4.5) with the approximate tokenizer."""

from __future__ import annotations

import pytest

from tui.domain.workload import LoadSpec
from tui.load.prompts import ApproxTokenizer, random_prompts


def test_fixed_lengths_without_range_ratio() -> None:
    prompts = random_prompts(LoadSpec(input_len=32, output_len=7, num_prompts=5, seed=0))
    assert len(prompts) == 5
    # real input = 32 − 1 special token (BOS) = 31 tokens, one word each.
    assert [p.prompt_len for p in prompts] == [31] * 5
    assert [len(p.prompt.split()) for p in prompts] == [31] * 5
    assert [p.expected_output_len for p in prompts] == [7] * 5
    assert [p.index for p in prompts] == [0, 1, 2, 3, 4]
    assert len({p.prompt for p in prompts}) == 5  # offsets differ per request


def test_range_ratio_bounds() -> None:
    spec = LoadSpec(input_len=101, output_len=10, range_ratio=0.5, num_prompts=2000, seed=3)
    prompts = random_prompts(spec)
    inputs = [p.prompt_len for p in prompts]
    outputs = [p.expected_output_len for p in prompts]
    # real = 100: [floor(100·0.5), ceil(100·1.5)] = [50, 150]; output [5, 15]
    assert (min(inputs), max(inputs)) == (50, 150)
    assert (min(outputs), max(outputs)) == (5, 15)


def test_output_length_never_below_one() -> None:
    spec = LoadSpec(input_len=20, output_len=1, range_ratio=0.9, num_prompts=500, seed=1)
    outputs = {p.expected_output_len for p in random_prompts(spec)}
    # [max(1, floor(0.1)), ceil(1.9)] = [1, 2]
    assert outputs == {1, 2}


def test_shared_prefix() -> None:
    spec = LoadSpec(input_len=11, output_len=4, prefix_len=8, num_prompts=6, seed=5)
    prompts = random_prompts(spec)
    heads = {" ".join(p.prompt.split()[:8]) for p in prompts}
    assert len(heads) == 1
    assert [p.prompt_len for p in prompts] == [8 + 10] * 6


def test_seeded() -> None:
    spec = LoadSpec(input_len=20, range_ratio=0.3, num_prompts=10, seed=9)
    assert random_prompts(spec) == random_prompts(spec)
    assert random_prompts(spec) != random_prompts(spec.model_copy(update={"seed": 10}))


def test_too_short_input_is_refused() -> None:
    with pytest.raises(ValueError, match="too small"):
        random_prompts(LoadSpec(input_len=1, num_prompts=1))


def test_approx_tokenizer_round_trips_its_words() -> None:
    tok = ApproxTokenizer()
    ids = [5, 17, 42, 3]
    assert tok.encode(tok.decode(ids)) == ids
    assert tok.decode([0, 5]) == tok.decode([5])  # the special id is dropped
    assert 0 in tok.all_special_ids and tok.num_special_tokens_to_add() == 1
    assert tok.vocab_size > 400
    assert tok.encode(tok.decode(range(tok.vocab_size))) == list(range(1, tok.vocab_size))
    assert all(" " not in tok.decode([i]) for i in range(1, tok.vocab_size))
