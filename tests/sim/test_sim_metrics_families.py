"""The simulator's /metrics has every family and label name of the real vLLM 0.32 pages.

References: ``tests/captures/metrics_after_load.txt`` (the CPU build after a load) and
``tests/sim/captures/metrics_lora_mfu.txt`` (with ``--enable-lora`` and
``--enable-mfu-metrics``). Beyond vLLM's families the simulator adds only the DCGM gauges
(a separate exporter in real deployments) and ``vtc_sim_info``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.running_sim import Running, start_sim
from prometheus_client.parser import text_string_to_metric_families

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
SIM_CAPTURES = Path(__file__).resolve().parent / "captures"
MODEL = "meta-llama/Llama-3.2-1B-Instruct"
OURS_ONLY = ("DCGM_", "vtc_sim_")


def families(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """``{family: (type, label names)}`` of vLLM's and the HTTP families on a page."""
    out: dict[str, tuple[str, frozenset[str]]] = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith(("vllm:", "http_", *OURS_ONLY)):
            continue
        names = {k for s in family.samples for k in s.labels if k not in ("le", "quantile")}
        out[family.name] = (family.type, frozenset(names))
    return out


async def _load(sim: Running, model: str) -> None:
    await sim.client.get("/v1/models")
    await sim.client.post("/tokenize", json={"prompt": "hello"})
    for stream in (False, True):
        r = await sim.client.post(
            "/v1/completions",
            json={"model": model, "prompt": "one two three", "max_tokens": 4, "stream": stream},
        )
        assert r.status_code == 200
    r = await sim.client.post("/v1/completions", json={"model": "nope", "prompt": "x"})
    assert r.status_code == 404


def _compare(ours: dict[str, tuple[str, frozenset[str]]], real_text: str) -> None:
    real = families(real_text)
    extra = {n for n in ours if n not in real and not n.startswith(OURS_ONLY)}
    missing = set(real) - set(ours)
    assert not missing, f"families vLLM has and the simulator lacks: {sorted(missing)}"
    assert not extra, f"families the simulator invents: {sorted(extra)}"
    for name, (kind, labels) in real.items():
        assert ours[name][0] == kind, name
        assert ours[name][1] == labels, f"{name}: {sorted(ours[name][1] ^ labels)}"


async def test_families_and_labels_match_the_capture() -> None:
    sim = await start_sim(MODEL, "--sim-speed", "500", "--max-model-len", "4096")
    try:
        await _load(sim, MODEL)
        text = (await sim.client.get("/metrics")).text
    finally:
        assert await sim.close() == 0
    ours = families(text)
    _compare(ours, (CAPTURES / "metrics_after_load.txt").read_text())
    assert len(ours["vllm:cache_config_info"][1]) == 37
    assert "vllm:lora_requests_info" not in ours  # registered only with --enable-lora


async def test_lora_and_mfu_families_match_their_capture() -> None:
    sim = await start_sim(
        MODEL,
        "--sim-speed",
        "500",
        "--max-model-len",
        "4096",
        "--enable-lora",
        "--max-loras",
        "2",
        "--enable-mfu-metrics",
        "--lora-modules",
        "ad8=/tmp/x/lora8",
    )
    try:
        await _load(sim, "ad8")
        page = await sim.metrics()
        text = (await sim.client.get("/metrics")).text
    finally:
        assert await sim.close() == 0
    _compare(families(text), (SIM_CAPTURES / "metrics_lora_mfu.txt").read_text())
    assert page["vllm:estimated_flops_per_gpu_total"] > 0
    assert page["vllm:estimated_read_bytes_per_gpu_total"] > 0


async def test_mfu_counters_stay_zero_without_the_flag() -> None:
    sim = await start_sim(MODEL, "--sim-speed", "500", "--max-model-len", "4096")
    try:
        await _load(sim, MODEL)
        page = await sim.metrics()
    finally:
        await sim.close()
    assert page["vllm:estimated_flops_per_gpu_total"] == 0
    assert page["vllm:generation_tokens_total"] > 0


@pytest.mark.parametrize("speed", ["1", "8"])
async def test_sim_info_names_the_gpu_and_the_time_scale(speed: str) -> None:
    sim = await start_sim(MODEL, "--sim-speed", speed, "--sim-gpu", "rtx3080-10gb")
    try:
        text = (await sim.client.get("/metrics")).text
    finally:
        await sim.close()
    (info,) = [f for f in text_string_to_metric_families(text) if f.name == "vtc_sim_info"]
    (sample,) = info.samples
    assert sample.value == 1
    assert sample.labels["gpu"] == "rtx3080-10gb"
    assert sample.labels["gpu_name"] == "NVIDIA GeForce RTX 3080"
    assert sample.labels["speed"] == speed
    assert sample.labels["tokenizer"] == "approximate"
    log = sim.out.getvalue()
    assert "vtc-sim: simulated GPU NVIDIA GeForce RTX 3080 (rtx3080-10gb" in log
    assert ("time is scaled: --sim-speed 8 runs 8x faster" in log) == (speed == "8")
