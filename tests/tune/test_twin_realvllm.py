"""``vtc sweep --strategy twin`` against the real CPU build of vLLM 0.32 on a 2x2 space.

The tiny local Llama, eager mode, a 64 MiB KV cache. No profile: the twin starts cold and
is calibrated on the first real start (three short loads on that server), then refitted
with every real trial. At most two starts (``--max-starts 2``, ~30-45 s each here): the
best it reports must be a configuration measured on the real server, confirmed under the
three workload seeds, with the whole space's predictions beside it, marked predicted. Run
it under the shared lock: ``flock /tmp/vtc-realvllm.lock pytest -q -m realvllm
tests/tune/test_twin_realvllm.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.real_vllm import provisioned_vllm
from fakes.sweep_process import start_sweep, stored_runs

from tui.server.provision import ProvisionedVllm

pytestmark = pytest.mark.realvllm

DEADLINE_S = 600.0  # a bound for a hung process; two starts take ~1.5 minutes when busy


@pytest.fixture(scope="module")
def real_vllm() -> ProvisionedVllm:
    """The provisioned vLLM; skips (fails in CI) when absent."""
    return provisioned_vllm()


def spec_text(model: Path) -> str:
    """A 2x2 space on the tiny model, the SLO lax enough for every configuration."""
    return f"""\
name = "realvllm-twin-2x2"
strategy = "grid"
objective = "output_throughput"

[base]
model = "{model}"

[base.flags]
max_model_len = 512
kv_cache_memory_bytes = 67108864
enforce_eager = true

[parameters]
max_num_seqs = [2, 8]
max_num_batched_tokens = [512, 1024]

[workload]
input_len = 64
output_len = 16
num_prompts = 16

[slo]
p99_e2el_ms = 120000

[search]
rate_search = "none"
"""


def test_a_twin_sweep_confirms_its_best_on_the_real_server(
    real_vllm: ProvisionedVllm, tmp_path: Path
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(real_vllm.model), encoding="utf-8")
    data, out = tmp_path / "data", tmp_path / "out.json"
    args = [
        "--vllm",
        str(real_vllm.vllm),
        "--startup-timeout",
        "240",
        "--strategy",
        "twin",
        "--max-starts",
        "2",
        "--json",
        str(out),
    ]
    sweep = start_sweep(spec, data, args, env={"HF_HUB_OFFLINE": "1"})
    assert sweep.wait(DEADLINE_S) == 0, sweep.text()

    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["strategy"] == "twin"
    trials = {t["index"]: t for t in report["trials"]}
    predicted = [t for t in trials.values() if t["source"] == "predicted"]
    measured = [t for t in trials.values() if t["source"] == "measured"]
    assert len(predicted) == 4 and all(t["predicted_by"] for t in predicted)
    assert all(t["run_id"] is None for t in predicted)  # never started
    assert 1 <= len(measured) == report["starts"] <= 2
    assert measured[0]["measurements"][0]["phase"] == "calibrate 1"  # the cold twin's fit

    best = report["best"]
    assert best is not None and best["slo_met"] is True
    chosen = trials[best["index"]]
    assert chosen["source"] == "measured" and chosen["run_id"] == best["run_id"]
    seeds = [m["seed"] for m in chosen["measurements"] if m["phase"].startswith("seed")]
    assert seeds == [0, 1, 2]  # confirmed under the three workload seeds...
    worst = min(m["objective"] for m in chosen["measurements"] if m["phase"].startswith("seed"))
    assert best["objective"] == worst  # ...and reported by the worst
    assert "twin:" in "\n".join(report["notes"])

    runs = {r.id: r for r in stored_runs(data / "runs.sqlite") if r.sweep is not None}
    # every run on the board is a real trial's (its loads), none a prediction's
    assert {r.sweep.trial for r in runs.values() if r.sweep} == {t["index"] for t in measured}
    assert runs[best["run_id"]].bench is not None  # the board holds its measurement
