"""The run detail's Reproduce section: the ``vllm serve`` line an operator runs on a real
box, whatever served the run here (the simulator's command is only a note under it)."""

from __future__ import annotations

import sys

from fakes.runs import served_run

from tui.domain.results import Reproduction
from tui.ui.run_detail_text import repro_lines


def _texts(run_lines: list[object]) -> list[str]:
    return [str(line).strip() for line in run_lines]


def test_a_demo_run_is_reproduced_as_vllm_serve_not_as_the_simulator() -> None:
    sim_argv = [
        sys.executable,
        "-m",
        "tui.sim",
        "serve",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--max-model-len",
        "4096",
        "--quantization",
        "fp8",
        "--sim-speed",
        "4",
    ]
    run = served_run(3, max_model_len=4096, quantization="fp8").model_copy(
        update={"repro": Reproduction(argv=sim_argv, vllm_version="0.32.0")}
    )
    texts = _texts(repro_lines(run))
    assert texts[0] == (
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 4096 --quantization fp8"
    )
    assert "--sim-speed" not in texts[0]
    assert any(t.startswith("ran here as (not vLLM):") and "tui.sim" in t for t in texts[1:])


def test_a_real_run_shows_its_command_once_and_an_unrecorded_one_still_has_it() -> None:
    argv = ["vllm", "serve", "m", "--max-num-seqs", "64"]
    run = served_run(4, model="m", max_num_seqs=64).model_copy(
        update={"repro": Reproduction(argv=argv)}
    )
    texts = _texts(repro_lines(run))
    assert texts[0] == "vllm serve m --max-num-seqs 64"
    assert not any("ran here as" in t for t in texts)
    old = served_run(5, model="m", max_num_seqs=8)  # no reproduction recorded
    assert _texts(repro_lines(old))[0] == "vllm serve m --max-num-seqs 8"
