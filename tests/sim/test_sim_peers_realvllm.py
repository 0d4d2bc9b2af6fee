"""vLLM's own ``vllm bench serve`` runs against the simulator unchanged and agrees on counts.

Needs the CPU build of vLLM (``vtc setup-cpu-vllm``) for its ``vllm bench serve`` and the
tiny Llama's folder; the simulator serves that folder, so both sides tokenize with the
same ``tokenizer.json``: no ``tokenizer mismatch`` re-alignment, and the simulator's
``vllm:prompt_tokens_total`` equals bench serve's ``Total input tokens``.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from fakes.real_vllm import provisioned_vllm
from fakes.sim_process import sim_process

pytestmark = pytest.mark.realvllm


def _prompt_tokens(text: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:prompt_tokens_total")
    )


def test_bench_serve_runs_against_the_simulator_without_a_tokenizer_warning() -> None:
    provisioned = provisioned_vllm()
    model = str(provisioned.model)
    with sim_process(model, "--sim-speed", "20", "--block-size", "128") as sim:
        sim.wait_ready()
        before = _prompt_tokens(sim.client.get("/metrics").text)
        argv = [
            str(provisioned.vllm),
            "bench",
            "serve",
            "--backend",
            "vllm",
            "--base-url",
            sim.base,
            "--model",
            model,
            "--dataset-name",
            "random",
            "--random-input-len",
            "128",
            "--random-output-len",
            "16",
            "--num-prompts",
            "30",
            "--request-rate",
            "inf",
            "--seed",
            "0",
        ]
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
            check=False,
        )
        after = _prompt_tokens(sim.client.get("/metrics").text)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "tokenizer mismatch" not in out
    assert re.search(r"Successful requests:\s+30\b", out)
    total = re.search(r"Total input tokens:\s+(\d+)", out)
    assert total is not None and int(total.group(1)) == after - before
