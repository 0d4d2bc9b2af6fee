"""Shared-prefix, JSONL (bench serve's "custom") and ShareGPT workloads."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tui.domain.workload import LoadSpec
from tui.load.datasets import (
    DatasetError,
    custom_prompts,
    expected_hit_pct,
    shared_prefix_spec,
    sharegpt_prompts,
)
from tui.load.prompts import ApproxTokenizer, random_prompts

TOK = ApproxTokenizer()  # one word = one token, plus one special token (BOS)


def test_shared_prefix_follows_auto_tune_arithmetic() -> None:
    spec = shared_prefix_spec(LoadSpec(input_len=1000, output_len=8), 40.0)
    # auto_tune.sh: prefix = 1000·40/100 = 400, --random-input-len = 1000 − 400 = 600.
    assert (spec.prefix_len, spec.input_len) == (400, 600)
    prompts = random_prompts(spec.model_copy(update={"num_prompts": 3}))
    heads = {" ".join(p.prompt.split()[:400]) for p in prompts}
    assert len(heads) == 1  # every prompt starts with the same 400 tokens
    assert {p.prompt_len for p in prompts} == {400 + 599}  # 600 − 1 special token
    assert shared_prefix_spec(LoadSpec(input_len=7), 0.0).prefix_len == 0
    with pytest.raises(ValueError, match="cache hit"):
        shared_prefix_spec(LoadSpec(), 100.0)


def test_expected_hit_rate_counts_whole_blocks() -> None:
    # BOS + 400 prefix tokens = 401 shared; blocks of 16 -> 25 blocks = 400 tokens cached,
    # over 1 + 999 = 1000 prompt tokens on the server: 40.0 %.
    assert expected_hit_pct(400, 999, 16, 1) == pytest.approx(40.0)
    # Blocks of 128 (CPU): 3 blocks = 384 tokens -> 38.4 %.
    assert expected_hit_pct(400, 999, 128, 1) == pytest.approx(38.4)
    # A prefix shorter than a block never hits.
    assert expected_hit_pct(100, 999, 128, 1) == 0.0
    # The last prompt token is always computed: an all-prefix prompt caps at n − 1.
    assert expected_hit_pct(31, 31, 16, 1) == pytest.approx(100.0 * 31 / 32)


def _write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_custom_jsonl_shuffles_like_bench_serve(tmp_path: Path) -> None:
    rows = [{"prompt": f"word{i} of the", "output_tokens": i + 1} for i in range(6)]
    path = _write_jsonl(tmp_path / "p.jsonl", rows)
    prompts = custom_prompts(path, TOK, 4, output_len=None, seed=3)
    # bench serve: random.seed(seed); random.shuffle(rows); then the first N.
    expected = list(rows)
    random.Random(3).shuffle(expected)
    assert [p.prompt for p in prompts] == [r["prompt"] for r in expected[:4]]
    assert [p.expected_output_len for p in prompts] == [r["output_tokens"] for r in expected[:4]]
    assert [p.index for p in prompts] == [0, 1, 2, 3]
    # prompt_len counts the special token too (tokenizer(prompt).input_ids).
    assert {p.prompt_len for p in prompts} == {1 + 3}


def test_custom_fixed_output_len_no_shuffle_and_oversampling(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "p.jsonl", [{"prompt": "a"}, {"prompt": "b"}])
    prompts = custom_prompts(path, TOK, 5, output_len=7, seed=1, shuffle=False)
    assert [p.prompt for p in prompts[:2]] == ["a", "b"]
    # Oversampled with random.seed(seed) then random.choice, as maybe_oversample_requests.
    rng = random.Random(1)
    extra = [rng.choice(["a", "b"]) for _ in range(3)]
    assert [p.prompt for p in prompts[2:]] == extra
    assert {p.expected_output_len for p in prompts} == {7}
    assert len(custom_prompts(path, TOK, 5, output_len=7, oversample=False)) == 2
    assert len(custom_prompts(path, TOK, 0, output_len=7)) == 2  # 0: every line


def test_custom_errors_are_clear(tmp_path: Path) -> None:
    no_count = _write_jsonl(tmp_path / "a.jsonl", [{"prompt": "x"}])
    with pytest.raises(DatasetError, match="'output_tokens' field"):
        custom_prompts(no_count, TOK, 1, output_len=None)
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"prompt": "x"}\n{not json}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"b\.jsonl:2: not JSON"):
        custom_prompts(bad, TOK, 1)
    no_prompt = _write_jsonl(tmp_path / "c.jsonl", [{"text": "x"}])
    with pytest.raises(DatasetError, match="string 'prompt'"):
        custom_prompts(no_prompt, TOK, 1)
    with pytest.raises(DatasetError, match="cannot read"):
        custom_prompts(tmp_path / "missing.jsonl", TOK, 1)


def _conversation(human: str, gpt: str) -> dict[str, object]:
    return {"conversations": [{"from": "human", "value": human}, {"from": "gpt", "value": gpt}]}


def test_sharegpt_filters_and_lengths(tmp_path: Path) -> None:
    data = [
        _conversation("one two three four five", "the of and to in is"),  # 6 + 7 tokens
        {"conversations": [{"from": "human", "value": "only one turn here"}]},  # dropped
        _conversation("hi", "the of and to in"),  # prompt 2 tokens < 4: skipped
        _conversation("a b c d", "x"),  # output 2 tokens < 4: skipped
        _conversation("the of and to in is it you", "the of and"),  # 9 + 4 tokens
    ]
    path = tmp_path / "sg.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    prompts = sharegpt_prompts(path, TOK, 10, seed=0, shuffle=False, oversample=False)
    assert [(p.prompt_len, p.expected_output_len) for p in prompts] == [(6, 7), (9, 4)]
    # A fixed output length skips the minimum-output check: "a b c d" is kept.
    fixed = sharegpt_prompts(path, TOK, 10, output_len=3, shuffle=False, oversample=False)
    assert [p.prompt for p in fixed][-1] == "the of and to in is it you"
    assert len(fixed) == 3 and {p.expected_output_len for p in fixed} == {3}
    # Shuffled with random.seed(seed) over the entries with two turns or more.
    entries = [e for e in data if len(e["conversations"]) >= 2]  # type: ignore[arg-type]
    random.Random(5).shuffle(entries)
    shuffled = sharegpt_prompts(path, TOK, 1, seed=5, oversample=False)
    first_valid = next(
        e["conversations"][0]["value"]  # type: ignore[index]
        for e in entries
        if e["conversations"][0]["value"] not in ("hi", "a b c d")  # type: ignore[index]
    )
    assert shuffled[0].prompt == first_valid
    assert len(sharegpt_prompts(path, TOK, 5, seed=0)) == 5  # oversampled


def test_sharegpt_errors(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"not": "a list"}', encoding="utf-8")
    with pytest.raises(DatasetError, match="JSON list"):
        sharegpt_prompts(path, TOK, 1)
    path.write_text("[", encoding="utf-8")
    with pytest.raises(DatasetError, match="not JSON"):
        sharegpt_prompts(path, TOK, 1)
    path.write_text(json.dumps([{"conversations": [{"value": 1}, {"value": "x"}]}]))
    with pytest.raises(DatasetError, match="string 'value'"):
        sharegpt_prompts(path, TOK, 1)
    path.write_text(json.dumps([_conversation("hi", "x")]))
    with pytest.raises(DatasetError, match="no usable request"):
        sharegpt_prompts(path, TOK, 2)
