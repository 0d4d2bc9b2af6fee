"""Responses, SSE chunks, /v1/models and request logs have vLLM 0.32's shape, field for field.

Compared with what the real server answered to the same requests
(``tests/sim/captures/``): every key in the same place and order, ``null`` where vLLM sends
``null``, and the same prompt ids (the tiny model's tokenizer is the provisioned one's).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fakes.running_sim import Running, start_sim
from fakes.tiny_model import write_tiny_model

from tui.sim.versions import DEFAULT_SIM_VLLM_VERSION

CAPTURES = Path(__file__).resolve().parent / "captures"


def shape(value: Any) -> Any:
    """Keys (in order) and value kinds, recursively; lists by their first element."""
    if isinstance(value, dict):
        return [(k, shape(v)) for k, v in value.items()]
    if isinstance(value, list):
        return ["list", shape(value[0])] if value else ["list"]
    if value is None:
        return None
    return type(value).__name__


def sse_objects(text: str) -> list[Any]:
    chunks = [line[len("data: ") :] for line in text.split("\n") if line.startswith("data: ")]
    assert chunks[-1] == "[DONE]"
    return [json.loads(c) for c in chunks[:-1]]


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Running]:
    model = write_tiny_model(tmp_path / "tiny-llama")
    running = await start_sim(
        str(model),
        "--sim-speed",
        "500",
        "--enable-log-requests",
        "--enable-lora",
        "--max-loras",
        "2",
        "--lora-modules",
        "ad8=/tmp/x/lora8",
        "ad16=/tmp/x/lora16",
    )
    try:
        yield running
    finally:
        assert await running.close() == 0


async def _post(sim: Running, path: str, body: dict[str, Any]) -> str:
    r = await sim.client.post(path, json=body)
    assert r.status_code == 200, r.text
    return r.text


COMPLETION = {"prompt": "hello there world", "max_tokens": 4}
CHAT = {"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 3}
STREAMS = [
    (
        "cmpl_stream_ids.txt",
        "/v1/completions",
        {
            **COMPLETION,
            "stream": True,
            "stream_options": {"include_usage": True},
            "return_token_ids": True,
        },
    ),
    ("cmpl_stream.txt", "/v1/completions", {**COMPLETION, "max_tokens": 3, "stream": True}),
    (
        "cmpl_stream_multi.txt",
        "/v1/completions",
        {"prompt": ["hi", "hello"], "max_tokens": 2, "stream": True, "return_token_ids": True},
    ),
    (
        "chat_stream_ids.txt",
        "/v1/chat/completions",
        {
            **CHAT,
            "stream": True,
            "stream_options": {"include_usage": True},
            "return_token_ids": True,
        },
    ),
    ("chat_stream.txt", "/v1/chat/completions", {**CHAT, "stream": True}),
]


@pytest.mark.parametrize(("capture", "path", "body"), STREAMS, ids=[s[0] for s in STREAMS])
async def test_sse_chunks_have_vllms_fields(
    sim: Running, capture: str, path: str, body: dict[str, Any]
) -> None:
    ours = sse_objects(await _post(sim, path, {**body, "ignore_eos": True}))
    real = sse_objects((CAPTURES / capture).read_text())
    assert len(ours) == len(real)
    for mine, theirs in zip(ours, real, strict=True):
        # Multi-prompt streams interleave choices in arrival order; compare by index.
        assert shape(mine) == shape(theirs)
    if body.get("return_token_ids"):
        first_real = real[0].get("prompt_token_ids") or real[0]["choices"][0]["prompt_token_ids"]
        first_ours = ours[0].get("prompt_token_ids") or ours[0]["choices"][0]["prompt_token_ids"]
        assert first_ours == first_real
    assert ours[-1]["system_fingerprint"].startswith(f"vllm-{DEFAULT_SIM_VLLM_VERSION}-")


@pytest.mark.parametrize(
    ("capture", "path", "body"),
    [
        ("cmpl_ids.json", "/v1/completions", {**COMPLETION, "max_tokens": 3}),
        ("chat_ids.json", "/v1/chat/completions", CHAT),
    ],
)
async def test_full_responses_have_vllms_fields(
    sim: Running, capture: str, path: str, body: dict[str, Any]
) -> None:
    ours = json.loads(await _post(sim, path, {**body, "return_token_ids": True}))
    real = json.loads((CAPTURES / capture).read_text())
    assert shape(ours) == shape(real)
    key = "prompt_token_ids"
    assert (ours.get(key) or ours["choices"][0][key]) == (real.get(key) or real["choices"][0][key])


async def test_models_lists_adapters_like_vllm(sim: Running) -> None:
    ours = (await sim.client.get("/v1/models")).json()
    real = json.loads((CAPTURES / "models.json").read_text())
    assert shape(ours) == shape(real)
    assert [(c["id"], c["root"], c["max_model_len"]) for c in ours["data"][1:]] == [
        ("ad8", "/tmp/x/lora8", None),
        ("ad16", "/tmp/x/lora16", None),
    ]
    assert ours["data"][1]["parent"] == ours["data"][0]["id"]


async def test_unknown_model_error_matches(sim: Running) -> None:
    r = await sim.client.post("/v1/completions", json={"model": "nope", "prompt": "x"})
    assert r.status_code == 404
    assert r.json() == json.loads((CAPTURES / "cmpl_badmodel.json").read_text())


def _pattern(line: str) -> str:
    """A log line with ids, times, pids and paths made generic."""
    line = line.split("] ", 1)[1]
    line = re.sub(r"(cmpl|chatcmpl|tokenize)-[0-9a-f]{16}", r"\1-ID", line)
    line = re.sub(r"ID(-\d+)?-[0-9a-f]{8}\.", "ID-SUFFIX.", line)
    return re.sub(r"max_tokens=\d+", "max_tokens=N", line)


async def test_log_requests_lines_match_vllm(sim: Running) -> None:
    await _post(sim, "/v1/completions", COMPLETION)
    await _post(sim, "/v1/completions", {**COMPLETION, "model": "ad8"})
    await _post(sim, "/tokenize", {"prompt": "hello"})
    real = {_pattern(x) for x in (CAPTURES / "log_requests.log").read_text().splitlines()}
    ours = [_pattern(x) for x in sim.out.getvalue().splitlines() if "] " in x]
    received = [x for x in ours if x.startswith(("Received request", "Added request"))]
    assert len(received) >= 5
    for line in received:
        assert line in real, line
    loaded = [x for x in ours if x.startswith("Loaded new LoRA adapter")]
    assert sorted(loaded) == sorted(x for x in real if x.startswith("Loaded new LoRA adapter"))
