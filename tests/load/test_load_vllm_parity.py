"""Parity with the real ``vllm bench serve`` code (needs the provisioned CPU vLLM).

Runs vLLM 0.32.0's own ``calculate_metrics`` and ``RandomDataset`` inside the provisioned
venv on the same inputs as ours, and compares: statistics key for key, and the random
prompts text for text (with the tiny model's real tokenizer behind our ``Tokenizer``
protocol, which a Hugging Face tokenizer satisfies as is).
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fakes.real_vllm import provisioned_vllm

from tui.domain.workload import LoadSpec
from tui.load.prompts import random_prompts
from tui.load.report import build_result
from tui.load.stats import RequestRecord, percentile_key
from tui.load.tokenizer import HfTokenizer
from tui.server.provision import find_provisioned

# timed: its statistics against vLLM's own bench, alone (tests/suite_tiers.py)
pytestmark = [pytest.mark.realvllm, pytest.mark.timed]

REPO = Path(__file__).resolve().parents[2]
PERCENTILES = [50.0, 90.0, 99.0, 99.9]
GOODPUT = {"ttft": 300.0, "tpot": 20.0}
DUR = 3.5
SPEC = LoadSpec(seed=3, num_prompts=20, prefix_len=7, range_ratio=0.3, input_len=40, output_len=9)

PROBE = r"""
import dataclasses, json, sys
data = json.load(sys.stdin)
sys.path.insert(0, data["repo"])
from transformers import AutoTokenizer
from vllm.benchmarks.datasets import RandomDataset
from vllm.benchmarks.lib.endpoint_request_func import RequestFuncOutput
from vllm.benchmarks.serve import calculate_metrics
from tui.domain.workload import LoadSpec
from tui.load.prompts import random_prompts

outputs = [RequestFuncOutput(**r) for r in data["records"]]
metrics, _ = calculate_metrics(
    input_requests=[], outputs=outputs, dur_s=data["dur"], tokenizer=None,
    selected_percentiles=data["percentiles"], goodput_config_dict=data["goodput"],
)
plain = {}
for key, value in dataclasses.asdict(metrics).items():
    if isinstance(value, list):
        plain[key] = [[float(p), float(v)] for p, v in value]
    else:
        plain[key] = float(value)
tok = AutoTokenizer.from_pretrained(data["model"])
s = data["spec"]
theirs = RandomDataset(random_seed=s["seed"]).sample(
    tokenizer=tok, num_requests=s["num_prompts"], prefix_len=s["prefix_len"],
    range_ratio=s["range_ratio"], input_len=s["input_len"], output_len=s["output_len"],
)
ours = random_prompts(LoadSpec(**s), tok)
print(json.dumps({
    "metrics": plain,
    "theirs": [[r.prompt, r.prompt_len, r.expected_output_len] for r in theirs],
    "ours": [[p.prompt, p.prompt_len, p.expected_output_len] for p in ours],
}))
"""


def synthetic_records() -> list[RequestRecord]:
    """50 requests with failures, single-token outputs and missing usage mixed in."""
    rng = random.Random(5)
    records = []
    for _ in range(50):
        ok = rng.random() > 0.1
        tokens = rng.randint(0, 6)
        itl = [rng.uniform(0.001, 0.05) for _ in range(max(0, tokens - 1))]
        ttft = rng.uniform(0.01, 0.5)
        records.append(
            RequestRecord(
                success=ok,
                prompt_len=rng.randint(1, 100),
                output_tokens=tokens,
                ttft=ttft,
                itl=itl,
                latency=ttft + sum(itl),
                error="" if ok else "x",
                start_time=100 + rng.uniform(0, 3),
            )
        )
    return records


@pytest.fixture(scope="module")
def vllm_answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    found = provisioned_vllm()
    probe = tmp_path_factory.mktemp("parity") / "probe.py"
    probe.write_text(PROBE, encoding="utf-8")
    payload = {
        "repo": str(REPO),
        "records": [
            {
                "success": r.success,
                "prompt_len": r.prompt_len,
                "output_tokens": r.output_tokens,
                "ttft": r.ttft,
                "itl": r.itl,
                "latency": r.latency,
                "error": r.error,
                "start_time": r.start_time,
            }
            for r in synthetic_records()
        ],
        "dur": DUR,
        "percentiles": PERCENTILES,
        "goodput": GOODPUT,
        "model": str(found.model),
        "spec": SPEC.model_dump(
            include={"seed", "num_prompts", "prefix_len", "range_ratio", "input_len", "output_len"}
        ),
    }
    done = subprocess.run(
        [str(found.python), str(probe)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        # A bound, not a speed target: importing vLLM and transformers took over 120 s on
        # the two shared cores at a load average of 16.
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answers: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answers


def test_statistics_match_vllm(vllm_answers: dict[str, Any]) -> None:
    theirs = vllm_answers["metrics"]
    ours = build_result(synthetic_records(), DUR, percentiles=PERCENTILES, goodput=GOODPUT)
    assert ours.completed == theirs["completed"] and ours.failed == theirs["failed"]
    assert ours.total_input_tokens == theirs["total_input"]
    assert ours.total_output_tokens == theirs["total_output"]
    for key in ("request_throughput", "output_throughput", "total_token_throughput"):
        assert getattr(ours, key) == pytest.approx(theirs[key], rel=1e-12), key
    assert ours.request_goodput == pytest.approx(theirs["request_goodput"], rel=1e-12)
    assert ours.max_output_tokens_per_s == theirs["max_output_tokens_per_s"]
    assert ours.max_concurrent_requests == theirs["max_concurrent_requests"]
    assert ours.rtfx == theirs["rtfx"]  # 0 for text: no audio
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for kind in ("mean", "median", "std"):
            key = f"{kind}_{metric}_ms"
            assert ours.stats[key] == pytest.approx(theirs[key], rel=1e-12), key
        for p, value in theirs[f"percentiles_{metric}_ms"]:
            key = percentile_key(p, metric)
            assert ours.stats[key] == pytest.approx(value, rel=1e-12), key


def test_random_prompts_match_vllm(vllm_answers: dict[str, Any]) -> None:
    # Same seed, same real tokenizer: the same prompt texts, lengths and output lengths.
    assert vllm_answers["ours"] == vllm_answers["theirs"]
    assert len(vllm_answers["ours"]) == SPEC.num_prompts


def test_random_prompts_from_tokenizer_json_match_vllm(vllm_answers: dict[str, Any]) -> None:
    # Our own tokenizer.json reader (the `tokenizers` library, no transformers) draws the
    # same prompts as RandomDataset with transformers' AutoTokenizer.
    pytest.importorskip("tokenizers")
    found = find_provisioned()
    assert found is not None
    tokenizer = HfTokenizer.from_dir(found.model)
    ours = random_prompts(SPEC, tokenizer)
    assert [[p.prompt, p.prompt_len, p.expected_output_len] for p in ours] == vllm_answers["theirs"]
