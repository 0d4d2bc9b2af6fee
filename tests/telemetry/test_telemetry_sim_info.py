"""A simulator's page says what it simulates (``vtc_sim_info``); a real vLLM page does not."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest

from tui.domain.telemetry import SimInfo
from tui.sim.metrics import SimMetrics
from tui.telemetry.vllm_metrics import parse_vllm_metrics, server_metrics

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def test_the_simulators_gpu_and_time_scale_are_read_off_its_page() -> None:
    metrics = SimMetrics("m", 512, {"block_size": "16"})
    metrics.set_sim_info("rtx3080-10gb", "NVIDIA GeForce RTX 3080", 1, 4.0, "model", "exact")
    page = generate_latest(metrics.registry).decode()
    sample = server_metrics(parse_vllm_metrics(page, t=1.0))
    assert sample.sim == SimInfo("NVIDIA GeForce RTX 3080", 4.0)
    assert sample.sim.label == "simulated RTX 3080 · 4x time"
    assert SimInfo("NVIDIA H100 80GB HBM3", 1.0).label == "simulated H100 80GB HBM3 · real time"


def test_a_real_vllm_page_is_not_a_simulators() -> None:
    page = (CAPTURES / "metrics_after_load.txt").read_text()
    assert server_metrics(parse_vllm_metrics(page, t=1.0)).sim is None
