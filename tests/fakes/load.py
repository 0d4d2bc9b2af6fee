"""A fake vLLM OpenAI server for load tests, on 127.0.0.1, in its own thread.

It runs its own event loop in a thread so that the client's loop holds only the
client's tasks (the runner tests compare ``asyncio.all_tasks()`` before and after).
Tests wait on its state with :meth:`FakeVllm.wait_until`, which sleeps on a condition
the server notifies at every change (a stream opened or ended, a client gone), never on
a timer; the timeout is only a bound.

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
- ``GET /v1/models`` lists one model, ``fake-model`` rooted at ``/models/fake``, with
  ``max_model_len`` (default 2048, as vLLM's model card carries it).

:func:`serve_fake` runs one for the length of a ``with`` block.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
        self.max_model_len = 2048
        self.changed = threading.Condition()

    def _notify(self) -> None:
        with self.changed:
            self.changed.notify_all()

    def dumps(self, obj: Any) -> str:
        return json.dumps(obj, separators=(",", ":")) if self.compact else json.dumps(obj)

    async def models(self, request: web.Request) -> web.Response:
        card = {
            "id": "fake-model",
            "object": "model",
            "root": "/models/fake",
            "max_model_len": self.max_model_len,
        }
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
        self._notify()
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
        self._notify()
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
            self._notify()
        return response

    def wait_until(self, predicate: Callable[[], bool], timeout_s: float = 60.0) -> bool:
        """Sleep until ``predicate()`` holds (woken at every change); False past the bound.

        Blocking: from a test's event loop, ``await asyncio.to_thread(fake.wait_until, ...)``.
        """
        with self.changed:
            return self.changed.wait_for(predicate, timeout=timeout_s)


@contextmanager
def serve_fake() -> Iterator[FakeVllm]:
    """A running :class:`FakeVllm`; ``fake.base_url`` is its ``http://127.0.0.1:PORT``."""
    fake = FakeVllm()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fake-vllm", daemon=True)
    thread.start()
    app = web.Application()
    app.router.add_post("/v1/completions", fake.handle)
    app.router.add_post("/v1/chat/completions", fake.handle)
    app.router.add_get("/v1/models", fake.models)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)

    async def start() -> str:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        return f"http://{host}:{port}"

    fake.base_url = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=30)

    async def stop() -> None:
        # Handlers still sleeping (timeout tests) are ended first, so that cleanup
        # closes every server-side socket.
        handlers = list(fake.handlers)
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await runner.cleanup()

    try:
        yield fake
    finally:
        asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()
