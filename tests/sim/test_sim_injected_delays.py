"""``--sim-fixed-ttft-ms`` / ``--sim-fixed-itl-ms``: injected delays instead of the cost model."""

from __future__ import annotations

import asyncio
import io
import json
import socket
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from tui.domain.flags.serve import ArgvError
from tui.sim.argv import FixedTiming, parse_command, split_sim_options
from tui.sim.fixed import HIGH_WATER, FixedStream
from tui.sim.logs import VllmLog
from tui.sim.server import SimServer

MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
TTFT_MS, ITL_MS = 60.0, 15.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_options_parse_and_default_to_zero() -> None:
    sim, rest = split_sim_options([MODEL, "--sim-fixed-ttft-ms", "80", "--sim-fixed-itl-ms=5"])
    assert rest == [MODEL]
    assert sim.fixed == FixedTiming(0.08, 0.005)
    assert sim.fixed.offset(0) == pytest.approx(0.08)
    assert sim.fixed.offset(3) == pytest.approx(0.095)
    only_itl, _ = split_sim_options([MODEL, "--sim-fixed-itl-ms", "2"])
    assert only_itl.fixed == FixedTiming(0.0, 0.002)
    assert split_sim_options([MODEL])[0].fixed is None


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "fast"])
def test_bad_values_are_refused(value: str) -> None:
    with pytest.raises(ArgvError, match="--sim-fixed-itl-ms"):
        split_sim_options([MODEL, "--sim-fixed-itl-ms", value])


@pytest.fixture
async def fixed_sim() -> AsyncIterator[str]:
    port = _free_port()
    command = parse_command(
        [
            MODEL,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--sim-speed",
            "200",
            "--sim-fixed-ttft-ms",
            str(TTFT_MS),
            "--sim-fixed-itl-ms",
            str(ITL_MS),
        ]
    )
    server = SimServer(command, VllmLog(io.StringIO(), io.StringIO()), install_signals=False)
    task = asyncio.create_task(server.run())
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(timeout=10) as client:
        for _ in range(400):  # bounded: ~4 s for the start-up stages at speed 200
            assert not task.done(), "simulator exited during start-up"
            try:
                if (await client.get(base + "/health")).status_code == 200:
                    break
            except httpx.TransportError:
                await asyncio.sleep(0.01)
    try:
        yield base
    finally:
        server.request_stop()
        assert await asyncio.wait_for(task, 10) == 0


async def _stream(base: str, path: str, body: dict[str, object]) -> list[tuple[float, dict]]:
    """``(seconds since the POST, payload)`` of each SSE data message ([DONE] as {})."""
    events: list[tuple[float, dict]] = []
    async with httpx.AsyncClient(timeout=10) as client:
        st = time.perf_counter()
        async with client.stream("POST", base + path, json=body) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    data = line[6:]
                    payload = {} if data == "[DONE]" else json.loads(data)
                    events.append((time.perf_counter() - st, payload))
    return events


async def test_stream_follows_the_injected_schedule(fixed_sim: str) -> None:
    body = {
        "model": MODEL,
        "prompt": "one two three",
        "max_tokens": 6,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    events = await _stream(fixed_sim, "/v1/completions", body)
    tokens = [(t, e) for t, e in events if e.get("choices")]
    assert len(tokens) == 6
    assert [e["choices"][0]["finish_reason"] for _, e in tokens] == [None] * 5 + ["length"]
    assert all(e["choices"][0]["text"].startswith(" ") for _, e in tokens)
    # Sleeps never end early: token k cannot arrive before ttft + k·itl (lower bounds only).
    for k, (t, _) in enumerate(tokens):
        assert t >= (TTFT_MS + k * ITL_MS) / 1000.0 - 1e-3
    usage = events[-2][1]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 6
    assert events[-1][1] == {}  # [DONE]


async def test_chat_stream_and_multiple_sequences(fixed_sim: str) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "max_completion_tokens": 3,
        "n": 2,
        "stream": True,
    }
    events = await _stream(fixed_sim, "/v1/chat/completions", body)
    chunks = [e["choices"][0] for _, e in events if e.get("choices")]
    for index in (0, 1):
        mine = [c for c in chunks if c["index"] == index]
        assert mine[0]["delta"] == {"role": "assistant", "content": ""}  # role chunk first
        assert len(mine) == 1 + 3
        assert mine[-1]["finish_reason"] == "length"
    assert events[-1][1] == {}


async def test_non_streaming_answer_waits_for_the_last_token(fixed_sim: str) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        st = time.perf_counter()
        response = await client.post(
            fixed_sim + "/v1/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 4}
        )
        elapsed = time.perf_counter() - st
    body = response.json()
    assert response.status_code == 200
    assert body["usage"]["completion_tokens"] == 4
    assert len(body["choices"][0]["text"].split()) == 4
    assert elapsed >= (TTFT_MS + 3 * ITL_MS) / 1000.0 - 1e-3


async def test_requests_are_still_validated(fixed_sim: str) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(
            fixed_sim + "/v1/completions",
            json={"model": MODEL, "prompt": "x", "max_tokens": 10**7, "stream": True},
        )
    assert response.status_code == 400
    assert "is too large" in response.json()["error"]["message"]


async def test_many_concurrent_streams_all_finish(fixed_sim: str) -> None:
    body = {"model": MODEL, "prompt": "a b", "max_tokens": 5, "stream": True}
    results = await asyncio.gather(
        *(_stream(fixed_sim, "/v1/completions", body) for _ in range(64))
    )
    assert all(sum(1 for _, e in events if e.get("choices")) == 5 for events in results)


class _FakeTransport(asyncio.WriteTransport):
    """Records writes; its write buffer size and closing state are set by the test."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.buffered = 0
        self.closing = False
        self.polls = 0  # how often the stream looked at the buffer

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def get_write_buffer_size(self) -> int:
        self.polls += 1
        return self.buffered

    def is_closing(self) -> bool:
        return self.closing


def _frames(k: int, last: int) -> bytes:
    return b"".join(b"t%d;" % j for j in range(k, last + 1))


async def test_tokens_already_due_go_out_in_one_chunk() -> None:
    transport = _FakeTransport()
    loop = asyncio.get_running_loop()
    # Arrived 1 s ago with ITL 10 ms: all 5 tokens are long due at the first tick.
    stream = FixedStream(transport, _frames, 5, FixedTiming(0.0, 0.01), loop.time() - 1.0)
    stream.start(0)
    assert await asyncio.wait_for(stream.done, 5) is True
    assert transport.writes == [b"f\r\nt0;t1;t2;t3;t4;\r\n"]  # one HTTP/1.1 chunk


async def test_writes_follow_the_schedule_and_stop_when_the_client_leaves() -> None:
    transport = _FakeTransport()
    loop = asyncio.get_running_loop()
    stream = FixedStream(transport, _frames, 1000, FixedTiming(0.0, 0.005), loop.time())
    stream.start(0)
    for _ in range(500):  # bounded: until a few separate writes happened
        if len(transport.writes) >= 3:
            break
        await asyncio.sleep(0.005)
    assert len(transport.writes) >= 3
    transport.closing = True
    assert await asyncio.wait_for(stream.done, 5) is False


async def test_a_full_socket_buffer_pauses_writing() -> None:
    transport = _FakeTransport()
    transport.buffered = HIGH_WATER + 1
    loop = asyncio.get_running_loop()
    stream = FixedStream(transport, _frames, 3, FixedTiming(0.0, 0.0), loop.time())
    stream.start(0)
    for _ in range(1000):  # bounded: until the stream has looked at the full buffer again
        if transport.polls >= 3:
            break
        await asyncio.sleep(0.005)
    assert transport.polls >= 3  # polled, and each time held back
    assert transport.writes == [] and not stream.done.done()
    transport.buffered = 0
    assert await asyncio.wait_for(stream.done, 5) is True
    assert transport.writes == [b"9\r\nt0;t1;t2;\r\n"]  # everything due, in one write
    stream.cancel()  # harmless once done
