"""LoRA adapters, preemption metrics and the development endpoints on a running simulator."""

from __future__ import annotations

import asyncio
import io
import json
import socket
from pathlib import Path

import pytest
from fakes.running_sim import start_sim

from tui.sim.cli import run
from tui.sim.scheduler import Scheduler, SchedulerConfig, SimRequest

MODEL = "meta-llama/Llama-3.2-1B-Instruct"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = ["serve", MODEL, *args, "--port", str(_free_port()), "--sim-speed", "2000"]
    argv += ["--host", "127.0.0.1"]
    return run(argv, out=out, err=err, install_signals=False), out.getvalue(), err.getvalue()


def test_an_adapter_above_max_lora_rank_stops_the_start(tmp_path: Path) -> None:
    adapter = tmp_path / "big"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 32, "peft_type": "LORA"}))
    code, _out, err = _serve("--enable-lora", "--lora-modules", f"big={adapter}")
    assert code == 1
    assert err.splitlines()[-1] == "ValueError: LoRA rank 32 is greater than max_lora_rank 16."


def test_lora_modules_need_enable_lora() -> None:
    code, _out, err = _serve("--lora-modules", "a=/x/a")
    assert code == 1
    assert err.splitlines()[-1].endswith("but LoRA is not enabled!")


def test_lora_config_is_validated_like_vllm() -> None:
    code, _out, err = _serve("--enable-lora", "--max-loras", "2", "--max-cpu-loras", "1")
    assert code == 1
    assert "1 validation error for LoRAConfig" in err
    assert "  Value error, max_cpu_loras (1) must be >= max_loras (2)." in err


def test_waiting_requests_for_a_third_adapter_are_deferred() -> None:
    sched = Scheduler(
        SchedulerConfig(
            num_gpu_blocks=1000,
            block_size=16,
            max_num_seqs=8,
            max_num_batched_tokens=4096,
            max_model_len=2048,
            max_loras=2,
        )
    )
    for i, adapter in enumerate(("a", "b", "c", "a", None)):
        sched.add(SimRequest(f"r{i}", list(range(100 + i, 164 + i)), 8, lora=adapter))
    plan = sched.schedule()
    running = {r.lora for r in sched.running}
    assert running == {"a", "b", None}
    assert [r.lora for r in sched.waiting] == ["c"] and sched.num_deferred == 1
    assert len(plan.admitted) == 4


async def test_adapters_are_served_and_counted() -> None:
    sim = await start_sim(
        MODEL,
        "--sim-speed",
        "500",
        "--enable-lora",
        "--max-loras",
        "1",
        "--lora-modules",
        "a=/x/a",
        "b=/x/b",
    )
    try:
        bodies = [{"model": name, "prompt": "one two three", "max_tokens": 8} for name in "ab"]
        answers = await asyncio.gather(
            *(sim.client.post("/v1/completions", json=b) for b in bodies)
        )
        assert [r.json()["model"] for r in answers] == ["a", "b"]
        text = (await sim.client.get("/metrics")).text
    finally:
        assert await sim.close() == 0
    assert 'vllm:lora_requests_info{max_lora="1"' in text
    assert 'running_lora_adapters="a"' in text or 'running_lora_adapters="b"' in text


async def test_preemptions_are_counted_in_the_metrics() -> None:
    sim = await start_sim(
        MODEL, "--sim-speed", "500", "--num-gpu-blocks-override", "40", "--max-model-len", "512"
    )
    try:
        body = {"prompt": "word " * 150, "max_tokens": 200, "ignore_eos": True}
        await asyncio.gather(*(sim.client.post("/v1/completions", json=body) for _ in range(6)))
        page = await sim.metrics()
    finally:
        await sim.close()
    assert page["vllm:num_preemptions_total"] > 0
    assert page["vllm:request_success_total"] == 6


async def test_reset_prefix_cache_is_a_dev_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_SERVER_DEV_MODE", raising=False)
    sim = await start_sim(MODEL, "--sim-speed", "500")
    try:
        assert (await sim.client.post("/reset_prefix_cache")).status_code == 404
    finally:
        await sim.close()


async def test_reset_prefix_cache_forgets_cached_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_SERVER_DEV_MODE", "1")
    sim = await start_sim(MODEL, "--sim-speed", "500")
    body = {"prompt": "shared words " * 100, "max_tokens": 2}
    try:
        await sim.client.post("/v1/completions", json=body)
        before = (await sim.metrics())["vllm:prefix_cache_hits_total"]
        await sim.client.post("/v1/completions", json=body)
        hit = (await sim.metrics())["vllm:prefix_cache_hits_total"]
        assert hit > before
        r = await sim.client.post("/reset_prefix_cache")
        assert r.status_code == 200 and r.json() == {"success": True}
        await sim.client.post("/v1/completions", json=body)
        assert (await sim.metrics())["vllm:prefix_cache_hits_total"] == hit
        for path in ("/reset_mm_cache", "/reset_encoder_cache"):
            assert (await sim.client.post(path)).status_code == 200
        # While a request holds blocks the reset fails, unless running requests are reset.
        long = {"prompt": "x " * 100, "max_tokens": 2000, "ignore_eos": True, "stream": True}
        async with sim.client.stream("POST", "/v1/completions", json=long) as stream:
            async for _ in stream.aiter_lines():
                break
            assert (await sim.client.post("/reset_prefix_cache")).json() == {"success": False}
            forced = await sim.client.post("/reset_prefix_cache?reset_running_requests=true")
            assert forced.json() == {"success": True}
    finally:
        await sim.close()
    log = sim.out.getvalue()
    assert "Resetting prefix cache..." in log and "Successfully reset prefix cache" in log
    assert "Failed to reset prefix cache because some blocks" in log
