"""Fixtures of the load tests: the fake vLLM server (see ``load_fake_vllm``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
from aiohttp import web
from load_fake_vllm import FakeVllm


@pytest.fixture
def fake_vllm() -> Iterator[FakeVllm]:
    """A running fake server; ``fake.base_url`` is its ``http://127.0.0.1:PORT``."""
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

    fake.base_url = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=10)

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
        asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
