"""``vtc sweep SPEC --demo`` end to end in real processes against the simulator.

A 2x3 grid on the simulated RTX 3080 (Llama-3.1-8B fp8, max_model_len 512) where
utilization 0.9 cannot hold one sequence's KV cache (vLLM 0.32's CUDA-graph reserve) and
0.95 serves: the sweep is SIGKILLed after its first measured trial, then run again. The
second run replays the finished trials without starting them, stops the server the killed
one left, and finishes; every trial is a run on the board tagged with the sweep, the failed
starts with their diagnosis; the JSON and the exit code say what met the SLOs.
"""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest
from fakes.sweep_process import start_sweep, stored_runs

from tui.domain.results import RunStatus
from tui.store.server_state import ServerStateFile

# slow tier: headless sweeps on simulator processes, killed and resumed.
pytestmark = pytest.mark.slow

SPEC = """\
name = "sim-2x3"
strategy = "grid"
objective = "output_throughput"
sim_gpu = "rtx3080-10gb"

[base]
model = "meta-llama/Llama-3.1-8B-Instruct"

[base.flags]
quantization = "fp8"
dtype = "float16"
max_model_len = 512

[parameters]
gpu_memory_utilization = [0.9, 0.95]
max_num_seqs = [8, 16, 32]

[workload]
input_len = 64
output_len = 32
num_prompts = 24

[slo]
p99_itl_ms = 5000
"""

DEADLINE_S = 300.0  # a bound for a hung process on a busy machine, never reached otherwise
ARGS = ["--demo", "--sim-speed", "20", "--startup-timeout", "120"]


def test_a_killed_sweep_resumes_and_every_trial_lands_on_the_board(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    data = tmp_path / "data"
    out = tmp_path / "out.json"

    first = start_sweep(spec, data, ARGS, n=1)
    # The three failed starts (utilization 0.9) come first, then a measured one: kill there.
    before = first.wait_for_trials(4, deadline_s=DEADLINE_S)
    first.kill()
    before = first.finished_trials()  # what the journal holds at the kill
    assert [t["state"] for t in before[:4]] == ["failed_start"] * 3 + ["measured"]
    assert len(before) < 6, "the sweep finished before it was killed: nothing to resume"
    left = ServerStateFile(data / "sweep-demo-lane0.json").read()  # the server in flight

    second = start_sweep(spec, data, [*ARGS, "--json", str(out)], n=2)
    assert second.wait(DEADLINE_S) == 0, second.text()
    text = second.text()
    assert f"resuming: {len(before)} finished trial(s)" in text
    if left is not None:  # the killed sweep's server was stopped before the resume
        assert not psutil.pid_exists(left.pid) or psutil.Process(left.pid).status() == "zombie"

    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["strategy"] == "grid" and len(report["trials"]) == 6
    by_index = {t["index"]: t for t in report["trials"]}
    for done in before:  # replayed, not run again: the same run
        assert by_index[done["index"]]["run_id"] == done["run_id"]
    best = report["best"]
    assert best["slo_met"] is True and best["flags"]["gpu_memory_utilization"] == 0.95
    assert best["metrics"]["output_throughput"] == max(
        t["objective"] for t in report["trials"] if t["state"] == "measured"
    )

    runs = [r for r in stored_runs(data / "demo-runs.sqlite") if r.sweep is not None]
    assert {r.sweep.sweep_id for r in runs if r.sweep} == {report["sweep_id"]}
    per_trial: dict[int, list[int]] = {}
    for r in runs:
        assert r.sweep is not None and r.id is not None
        per_trial.setdefault(r.sweep.trial, []).append(r.id)
    assert set(per_trial) == set(range(1, 7))  # every trial is a run on the board
    for done in before:  # a finished trial was started once, in all
        assert per_trial[done["index"]] == [done["run_id"]]
    failed = [r for r in runs if r.status is RunStatus.FAILED]
    assert len(failed) == 3 and all(
        r.diagnosis is not None and r.diagnosis.kind == "kv_cache_too_small" for r in failed
    )
    failed_trials = [t for t in report["trials"] if t["state"] == "failed_start"]
    assert len(failed_trials) == 3
    assert all(
        t["diagnosis_kind"] == "kv_cache_too_small" and t["diagnosis"] for t in failed_trials
    )
