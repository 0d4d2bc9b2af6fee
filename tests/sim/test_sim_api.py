"""The HTTP API in-process: auth, load, tokenize, aborts, prefix-cache metrics, stage parsing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from fakes.running_sim import Running, start_sim
from prometheus_client.parser import text_string_to_metric_families

MODEL = "Qwen/Qwen2.5-0.5B-Instruct"


async def start(*flags: str) -> Running:
    return await start_sim(MODEL, *flags)


@pytest.fixture
async def sim() -> AsyncIterator[Running]:
    running = await start(
        "--sim-speed",
        "200",
        "--max-model-len",
        "4096",
        "--api-key",
        "sekret",
        "--enable-server-load-tracking",
    )
    try:
        yield running
    finally:
        running.server.request_stop()
        assert await asyncio.wait_for(running.task, 10) == 0
        await running.client.aclose()


AUTH = {"Authorization": "Bearer sekret"}


async def test_api_key_guards_v1_only(sim: Running) -> None:
    r = await sim.client.get("/v1/models")
    assert r.status_code == 401 and r.json() == {"error": "Unauthorized"}
    assert (
        await sim.client.get("/v1/models", headers={"Authorization": "Bearer nope"})
    ).status_code == 401
    assert (await sim.client.get("/v1/models", headers=AUTH)).status_code == 200
    assert (await sim.client.get("/health")).status_code == 200
    assert (await sim.client.get("/metrics")).status_code == 200
    assert "'api_key': '***'" in sim.out.getvalue()
    assert "sekret" not in sim.out.getvalue()


async def test_tokenize_counts_words_and_the_load_counter(sim: Running) -> None:
    r = await sim.client.post("/tokenize", json={"prompt": "one two three, four"})
    body = r.json()
    assert body["count"] == 5  # four words and a comma; Qwen adds no BOS
    assert body["max_model_len"] == 4096
    assert (await sim.client.get("/load")).json() == {"server_load": 0}


async def test_wrong_model_and_prompt_too_long(sim: Running) -> None:
    r = await sim.client.post(
        "/v1/completions", headers=AUTH, json={"model": "other", "prompt": "x"}
    )
    assert r.status_code == 404
    assert r.json()["error"] == {
        "message": "The model `other` does not exist. Valid aliases: Qwen/Qwen2.5-0.5B-Instruct.",
        "type": "NotFoundError",
        "param": "model",
        "code": 404,
    }
    long_prompt = " ".join(["word"] * 5000)
    r = await sim.client.post("/v1/completions", headers=AUTH, json={"prompt": long_prompt})
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith(
        "This model's maximum context length is 4096 tokens. However, your prompt contains 5000 "
        "input tokens, which exceeds this limit even without any output tokens."
    )
    r = await sim.client.post("/v1/completions", headers=AUTH, json={"prompt": "x", "logprobs": 50})
    assert (
        r.json()["error"]["message"]
        == "Requested sample logprobs of 50, which is greater than max allowed: 20"
    )


async def metrics(sim: Running) -> dict[str, float]:
    text = (await sim.client.get("/metrics")).text
    return {
        s.name + json.dumps(s.labels, sort_keys=True): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


def value(samples: dict[str, float], name: str, **labels: str) -> float:
    key = name + json.dumps({"engine": "0", "model_name": MODEL, **labels}, sort_keys=True)
    return samples[key]


async def test_shared_prefix_requests_hit_the_prefix_cache(sim: Running) -> None:
    prefix = " ".join(f"w{i}" for i in range(64))  # 64 tokens = 4 blocks of 16
    for tail in ("alpha beta", "gamma delta"):
        r = await sim.client.post(
            "/v1/completions",
            headers=AUTH,
            json={"prompt": f"{prefix} {tail}", "max_tokens": 2, "ignore_eos": True},
        )
        assert r.status_code == 200
    m = await metrics(sim)
    assert value(m, "vllm:prefix_cache_queries_total") == 2 * 66
    assert value(m, "vllm:prefix_cache_hits_total") == 64
    assert value(m, "vllm:prompt_tokens_total") == 2 * 66
    assert value(m, "vllm:prompt_tokens_by_source_total", source="local_cache_hit") == 64
    assert value(m, "vllm:request_success_total", finished_reason="length") == 2
    assert value(m, "vllm:kv_cache_usage_perc") == 0.0

    # vLLM's periodic stats line (every 10 s of simulated time: 50 ms at --sim-speed 200).
    # One may have been logged between the two requests (0.0% then): wait for one logged
    # after both (a busy machine delays it; the bound only stops a hang).
    def stats_lines() -> list[str]:
        return [x for x in sim.out.getvalue().splitlines() if "Engine 000:" in x]

    before = len(stats_lines())
    for _ in range(2000):
        if len(stats_lines()) > before:
            break
        await asyncio.sleep(0.01)
    line = stats_lines()[-1]
    assert "[loggers.py:335]" in line and "GPU KV cache usage:" in line
    assert "Prefix cache hit rate: 48.5%" in line  # 64 hits of 132 queried tokens


async def test_client_disconnect_aborts_the_request(sim: Running) -> None:
    body = {"prompt": "go on", "max_tokens": 3000, "ignore_eos": True, "stream": True}
    async with sim.client.stream("POST", "/v1/completions", headers=AUTH, json=body) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                break  # leave after the first token
    for _ in range(200):
        m = await metrics(sim)
        if value(m, "vllm:request_success_total", finished_reason="abort") == 1:
            break
        await asyncio.sleep(0.02)
    assert value(m, "vllm:request_success_total", finished_reason="abort") == 1
    assert value(m, "vllm:num_requests_running") == 0
    assert value(m, "vllm:kv_cache_usage_perc") == 0.0
    assert sim.server.engine is not None and sim.server.engine.num_in_flight == 0
    assert "Traceback" not in sim.err.getvalue()


async def test_shutdown_ends_open_streams() -> None:
    running = await start("--sim-speed", "50", "--max-model-len", "4096")
    chunks: list[str] = []

    async def consume() -> None:
        body = {"prompt": "go", "max_tokens": 4000, "ignore_eos": True, "stream": True}
        async with running.client.stream("POST", "/v1/completions", json=body) as r:
            async for line in r.aiter_lines():
                if line:
                    chunks.append(line)

    reader = asyncio.create_task(consume())
    while not chunks:
        await asyncio.sleep(0.01)
    running.server.request_stop("SIGINT")
    assert await asyncio.wait_for(running.task, 10) == 0
    await asyncio.wait_for(reader, 10)
    await running.client.aclose()
    assert "data: [DONE]" not in chunks
    assert "[shutdown] EngineCore: trigger received signal=SIGINT" in running.out.getvalue()


async def test_disable_log_stats_drops_vllm_metrics_but_keeps_dcgm() -> None:
    running = await start("--sim-speed", "500", "--max-model-len", "1024", "--disable-log-stats")
    try:
        text = (await running.client.get("/metrics")).text
        names = {f.name for f in text_string_to_metric_families(text)}
        assert not any(n.startswith("vllm:") for n in names)
        assert "DCGM_FI_DEV_GPU_UTIL" in names
    finally:
        running.server.request_stop()
        await asyncio.wait_for(running.task, 10)
        await running.client.aclose()


async def test_console_stage_parser_reads_the_sim_log() -> None:
    stages = pytest.importorskip("tui.server.stages")
    running = await start("--sim-speed", "500", "--max-model-len", "8192")
    running.server.request_stop()
    await asyncio.wait_for(running.task, 10)
    await running.client.aclose()
    tracker = stages.StageTracker()
    seen = []
    for i, line in enumerate(running.out.getvalue().splitlines()):
        for event in tracker.feed(line, float(i)):
            name = getattr(getattr(event, "stage", None), "name", None)
            if name and name not in seen:
                seen.append(name)
    assert seen[:2] == ["LOADING_WEIGHTS", "COMPILING"] and "KV_CACHE" in seen and "API_UP" in seen
    assert tracker.kv_cache is not None and tracker.kv_cache.device == "GPU"
    assert tracker.kv_cache.max_model_len == 8192
