"""A fake vLLM OpenAI server for the load tests, on 127.0.0.1, in its own thread.

It runs its own event loop in a thread so that the client's loop holds only the
client's tasks (the runner tests compare ``asyncio.all_tasks()`` before and after).

Behaviour, per request:
- streams ``max_tokens`` (or ``max_completion_tokens``) chunks of text ``" tok"``, the
  first after ``first_delay_s``, the rest ``chunk_delay_s`` apart; then a usage chunk
  with ``choices: []`` and ``prompt_tokens = words + 1`` (the BOS a Llama tokenizer adds),
  then ``data: [DONE]``, like vLLM with ``stream_options.include_usage``;
- model ``fail-500`` or a request index (from ``x-request-id``) divisible by
  ``fail_every`` gets HTTP 500 with a JSON error body;
- model ``no-choices`` gets a stream with only the usage chunk and ``[DONE]``;
- ``compact`` (default True) writes JSON without spaces, as vLLM does (the client's fast
  path); False writes ``json.dumps``' spaced form (the client's ``json.loads`` path);
- ``omit_usage`` leaves the usage chunk out; ``batch`` writes that many chunks per write;
- ``last_finish_reason`` puts that ``finish_reason`` on the last token chunk;
- ``GET /v1/models`` lists one model, ``fake-model`` rooted at ``/models/fake``.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from aiohttp import web


class FakeVllm:
    """State and knobs of the fake server; counters are read from the test thread."""

    def __init__(self) -> None:
        self.first_delay_s = 0.0
        self.chunk_delay_s = 0.0
        self.fail_every = 0
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.open_streams = 0
        self.max_open_streams = 0
        self.disconnects = 0
        self.finished_streams = 0
        self.base_url = ""
        self.handlers: set[asyncio.Task[Any]] = set()
        self.compact = True
        self.omit_usage = False
        self.batch = 1
        self.last_finish_reason: str | None = None  # e.g. "abort": vLLM cutting streams short

    def dumps(self, obj: Any) -> str:
        return json.dumps(obj, separators=(",", ":")) if self.compact else json.dumps(obj)

    async def models(self, request: web.Request) -> web.Response:
        card = {"id": "fake-model", "object": "model", "root": "/models/fake"}
        return web.json_response({"object": "list", "data": [card]})

    def prompt_tokens(self, body: dict[str, Any]) -> int:
        if "prompt" in body:
            text = body["prompt"]
        else:
            text = " ".join(part["text"] for msg in body["messages"] for part in msg["content"])
        return len(text.split()) + 1

    async def handle(self, request: web.Request) -> web.StreamResponse:
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        try:
            return await self._handle(request)
        finally:
            self.handlers.discard(task)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        request_id = request.headers.get("x-request-id", "")
        index = int(request_id.rsplit("-", 1)[-1]) if request_id[-1:].isdigit() else -1
        if body.get("model") == "fail-500" or (
            self.fail_every and index >= 0 and index % self.fail_every == 0
        ):
            return web.json_response(
                {"object": "error", "message": "boom from the fake", "code": 500}, status=500
            )
        chat = request.path.endswith("/chat/completions")
        count = body.get("max_completion_tokens" if chat else "max_tokens", 16)
        if body.get("model") == "no-choices":
            count = 0
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        self.open_streams += 1
        self.max_open_streams = max(self.max_open_streams, self.open_streams)
        try:
            await asyncio.sleep(self.first_delay_s)
            pending: list[str] = []
            for i in range(count):
                if i and len(pending) == 0:
                    await asyncio.sleep(self.chunk_delay_s)
                if chat:
                    choice: dict[str, Any] = {"index": 0, "delta": {"content": " tok"}}
                else:
                    choice = {"index": 0, "text": " tok", "logprobs": None}
                if i == count - 1 and self.last_finish_reason is not None:
                    choice["finish_reason"] = self.last_finish_reason
                chunk = {"id": "cmpl-1", "choices": [choice], "usage": None}
                pending.append(f"data: {self.dumps(chunk)}\n\n")
                if len(pending) >= self.batch or i == count - 1:
                    await response.write("".join(pending).encode())
                    pending = []
            usage = {
                "prompt_tokens": self.prompt_tokens(body),
                "completion_tokens": count,
                "total_tokens": self.prompt_tokens(body) + count,
            }
            if not self.omit_usage:
                last = {"id": "cmpl-1", "choices": [], "usage": usage}
                await response.write(f"data: {self.dumps(last)}\n\n".encode())
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
            self.finished_streams += 1
        except (ConnectionError, asyncio.CancelledError):
            self.disconnects += 1
            raise
        finally:
            self.open_streams -= 1
        return response

    def wait_for(self, predicate: Any, timeout_s: float = 5.0) -> bool:
        """Poll ``predicate()`` until true or ``timeout_s`` passes (bounded wait)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.01)
        return bool(predicate())
