"""``vtc sweep SPEC --demo --strategy twin`` end to end in real processes (the simulator).

The demo's twin is its own catalogue GPU on the virtual clock, scaled to the demo server's
runs: the whole 2x3 space is ranked there (predicted rows, never started), and the best
ranked configurations are started on the simulator and confirmed under three seeds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.sweep_process import start_sweep, stored_runs

# slow tier: a twin-first sweep: calibration loads and real starts of the simulator.
pytestmark = pytest.mark.slow

SPEC = """\
name = "sim-twin"
strategy = "grid"
objective = "output_throughput"
sim_gpu = "a100-80gb"

[base]
model = "meta-llama/Llama-3.1-8B-Instruct"

[base.flags]
max_model_len = 1024

[parameters]
max_num_seqs = [8, 32, 128]
max_num_batched_tokens = [1024, 4096]

[workload]
input_len = 128
output_len = 32
num_prompts = 24

[slo]
p99_itl_ms = 5000

[search]
rate_search = "none"
"""

DEADLINE_S = 300.0  # a bound for a hung process on a busy machine, never reached otherwise


def test_a_demo_twin_sweep_ranks_on_the_twin_and_confirms_on_the_server(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    data, out = tmp_path / "data", tmp_path / "out.json"
    args = [
        "--demo",
        "--sim-speed",
        "20",
        "--startup-timeout",
        "120",
        "--strategy",
        "twin",
        "--json",
        str(out),
    ]
    sweep = start_sweep(spec, data, args)
    assert sweep.wait(DEADLINE_S) == 0, sweep.text()
    text = sweep.text()
    # predictions are counted apart, never printed as trials run (the JSON keeps each one)
    assert "6 predicted" in text and "trial " in text
    assert not [
        line for line in text.splitlines() if line.startswith("trial ") and " twin " in line
    ]

    report = json.loads(out.read_text(encoding="utf-8"))
    predicted = [t for t in report["trials"] if t["source"] == "predicted"]
    measured = [t for t in report["trials"] if t["source"] == "measured"]
    assert len(predicted) == 6
    assert all("a100-80gb (hand-made catalogue GPU)" in t["predicted_by"] for t in predicted)
    assert measured and len(measured) == report["starts"] < 6
    best = report["best"]
    assert best["slo_met"] and best["run_id"] in {t["run_id"] for t in measured}
    runs = [r for r in stored_runs(data / "demo-runs.sqlite") if r.sweep is not None]
    assert {t["run_id"] for t in measured} <= {r.id for r in runs}
    # every run on the board is a real trial's (its loads), none a prediction's
    assert {r.sweep.trial for r in runs if r.sweep} == {t["index"] for t in measured}
