"""A real ``python -m tui.sim serve`` subprocess, driven the way the console drives vLLM."""

from __future__ import annotations

import json
import signal
import socket
from collections.abc import Iterator

import httpx
import pytest
from fakes.sim_process import SimProcess, sim_process
from prometheus_client.parser import text_string_to_metric_families

from tui.sim.versions import DEFAULT_SIM_VLLM_VERSION

MODEL = "meta-llama/Llama-3.2-3B-Instruct"


@pytest.fixture(scope="module")
def server() -> Iterator[SimProcess]:
    with sim_process(
        MODEL,
        "--max-model-len",
        "2048",
        "--sim-speed",
        "5",
        "--enable-server-load-tracking",
        "--sim-gpu",
        "rtx4090-24gb",
    ) as sim:
        yield sim


def test_port_is_not_listening_until_ready_then_health_is_200(server: SimProcess) -> None:
    server.wait_for("non-default args:")
    port = int(server.base.rsplit(":", 1)[1])
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.connect(("127.0.0.1", port))  # bound, not listening (launcher.py:335-350)
    server.wait_for("Application startup complete.")
    r = httpx.get(server.base + "/health", timeout=5)
    assert r.status_code == 200 and r.content == b""
    version = httpx.get(server.base + "/version", timeout=5).json()
    assert version == {"version": DEFAULT_SIM_VLLM_VERSION}
    startup = "\n".join(server.lines)
    for text in (
        "Model loading took 5.98 GiB memory and ",
        "Available KV cache memory: ",
        "GPU KV cache size: ",
        "Graph capturing finished in ",
        "init engine (profile, create kv cache, warmup model) took ",
        f"Starting vLLM server on {server.base}",
    ):
        assert text in startup


def test_models_lists_max_model_len(server: SimProcess) -> None:
    server.wait_for("Application startup complete.")
    body = httpx.get(server.base + "/v1/models", timeout=5).json()
    assert body["object"] == "list"
    card = body["data"][0]
    assert (card["id"], card["owned_by"], card["max_model_len"]) == (MODEL, "vllm", 2048)


def sse(lines: Iterator[str]) -> list[str]:
    return [line[len("data: ") :] for line in lines if line.startswith("data: ")]


def test_streaming_completion_with_usage(server: SimProcess) -> None:
    server.wait_for("Application startup complete.")
    body = {
        "model": MODEL,
        "prompt": "the quick brown fox jumps over the lazy dog",
        "max_tokens": 12,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", server.base + "/v1/completions", json=body, timeout=10) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        messages = sse(r.iter_lines())
    assert messages[-1] == "[DONE]"
    chunks = [json.loads(m) for m in messages[:-1]]
    token_chunks = [c for c in chunks if c["choices"]]
    assert len(token_chunks) == 12
    assert all(c["object"] == "text_completion" and c["model"] == MODEL for c in chunks)
    assert token_chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert all(c["choices"][0]["finish_reason"] is None for c in token_chunks[:-1])
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == []
    assert usage == {
        "prompt_tokens": 10,
        "completion_tokens": 12,
        "total_tokens": 22,
    }  # 9 words + BOS


def test_chat_streaming_and_not(server: SimProcess) -> None:
    server.wait_for("Application startup complete.")
    messages = [{"role": "user", "content": [{"type": "text", "text": "hello there"}]}]
    body = {
        "model": MODEL,
        "messages": messages,
        "max_completion_tokens": 5,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", server.base + "/v1/chat/completions", json=body, timeout=10) as r:
        data = sse(r.iter_lines())
    chunks = [json.loads(m) for m in data[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert sum(1 for c in chunks[1:] if c["choices"]) == 5
    assert chunks[-1]["usage"]["completion_tokens"] == 5
    plain = httpx.post(
        server.base + "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "ignore_eos": True},
        timeout=10,
    ).json()
    assert plain["object"] == "chat.completion"
    assert plain["choices"][0]["message"]["role"] == "assistant"
    assert plain["choices"][0]["finish_reason"] == "length"
    assert plain["usage"]["completion_tokens"] == 3


def test_max_tokens_beyond_the_context_is_vllms_400(server: SimProcess) -> None:
    server.wait_for("Application startup complete.")
    r = httpx.post(
        server.base + "/v1/completions",
        json={"model": MODEL, "prompt": "one two three", "max_tokens": 5000},
        timeout=10,
    )
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "BadRequestError" and err["code"] == 400
    assert err["message"] == (
        "'max_tokens' or 'max_completion_tokens' is too large: 5000. This model's maximum "
        "context length is 2048 tokens and your request has 4 input tokens (5000 > 2048 - 4)."
    )


def test_metrics_page_has_vllm_and_dcgm_families(server: SimProcess) -> None:
    server.wait_for("Application startup complete.")
    before = _counter(server, "vllm:generation_tokens_total")
    httpx.post(
        server.base + "/v1/completions",
        json={"prompt": "a b c d", "max_tokens": 7, "ignore_eos": True},
        timeout=10,
    )
    text = httpx.get(server.base + "/metrics", timeout=5).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens",
        "vllm:generation_tokens",
        "vllm:prefix_cache_queries",
        "vllm:prefix_cache_hits",
        "vllm:num_preemptions",
        "vllm:request_success",
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:cache_config_info",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_GPU_UTIL",
    ):
        assert name in families, name
    running = families["vllm:num_requests_running"].samples[0]
    assert running.labels == {"model_name": MODEL, "engine": "0"}
    info = families["vllm:cache_config_info"].samples[0].labels
    assert info["block_size"] == "16" and int(info["num_gpu_blocks"]) > 0
    fb = families["DCGM_FI_DEV_FB_USED"].samples[0]
    assert fb.labels["gpu"] == "0" and fb.labels["modelName"] == "NVIDIA GeForce RTX 4090"
    assert fb.labels["UUID"].startswith("GPU-") and fb.labels["Hostname"]
    free = families["DCGM_FI_DEV_FB_FREE"].samples[0].value
    assert fb.value + free == pytest.approx(24217, abs=1)  # MiB, the 4090's total
    assert _counter(server, "vllm:generation_tokens_total") == before + 7
    reasons = {s.labels["finished_reason"] for s in families["vllm:request_success"].samples}
    assert {"stop", "length", "abort"} <= reasons


def _counter(server: SimProcess, sample: str) -> float:
    text = httpx.get(server.base + "/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == sample:
                return float(s.value)
    raise AssertionError(sample)


def test_sigterm_exits_0_after_vllms_shutdown_lines(server: SimProcess) -> None:
    server.wait_for("Application startup complete.")
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=10) == 0
    server.drain()
    out = "\n".join(server.lines)
    assert "[shutdown] API server: shutdown triggered" in out
    assert "[shutdown] EngineCore: trigger received signal=SIGTERM" in out
