"""A real HTTP server on a loopback socket that misbehaves on purpose, for scrape tests.

It runs its own event loop in a daemon thread, so both async tests and code that calls
``asyncio.run`` itself (``vtc top``) can scrape it. Each behaviour is one way a /metrics
endpoint has been seen to fail:

- ``page``: a normal 200 answer with ``body`` (Content-Length set);
- ``trickle``: headers at once, then one byte of body every ``interval_s``, forever;
- ``huge``: a 200 without Content-Length streaming ``huge_bytes`` of valid-looking lines;
- ``huge_declared``: a 200 whose Content-Length announces ``huge_bytes`` (then streams it);
- ``garbage``: a 200 whose body is not a Prometheus page;
- ``silent``: accepts the connection and never answers;
- ``status``: ``status`` (e.g. 500) with a large body.

``behaviour`` and ``body`` are plain attributes: a test may change them between scrapes.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

Behaviour = Literal["page", "trickle", "huge", "huge_declared", "garbage", "silent", "status"]

GARBAGE = b"\x00\xffnot a metrics page {{{ \xfe\n" + bytes(range(256)) * 64
HUGE_LINE = b'vllm:num_requests_running{engine="0",model_name="m"} 1.0\n'


@dataclass
class MisbehavingMetricsServer:
    """Serve ``/metrics`` with the chosen ``behaviour`` on 127.0.0.1 (``url`` once started)."""

    behaviour: Behaviour = "page"
    body: bytes = b""
    interval_s: float = 1.0
    huge_bytes: int = 50 * 1024 * 1024
    status: int = 500
    requests: int = 0
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _server: asyncio.Server | None = None
    _ready: threading.Event = field(default_factory=threading.Event)
    _stop: asyncio.Event | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The /metrics URL."""
        return self.base_url + "/metrics"

    def start(self) -> MisbehavingMetricsServer:
        """Listen (in a daemon thread) and return once the port is bound."""
        self._thread = threading.Thread(target=self._run, name="fake-metrics", daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("fake metrics server did not start")
        return self

    def stop(self) -> None:
        """Close the listener and every open connection, and join the thread."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(30)

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        tasks: set[asyncio.Task[None]] = set()

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            tasks.add(task)
            try:
                await self._answer(reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass  # the client hung up (it gave up at its deadline or its size cap)
            finally:
                tasks.discard(task)
                writer.close()

        self._server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        self._server.close()
        for task in list(tasks):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:  # keep-alive: one request after another on the same connection
            request = await reader.readuntil(b"\r\n\r\n")
            if not request:
                return
            self.requests += 1
            behaviour = self.behaviour
            if behaviour == "silent":
                await asyncio.Event().wait()  # until cancelled at stop()
            handler = getattr(self, f"_{behaviour}")
            await handler(writer)

    @staticmethod
    def _head(status: int, length: int | None) -> bytes:
        lines = [f"HTTP/1.1 {status} X", "Content-Type: text/plain; version=0.0.4"]
        lines.append(f"Content-Length: {length}" if length is not None else "Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    async def _page(self, writer: asyncio.StreamWriter) -> None:
        writer.write(self._head(200, len(self.body)) + self.body)
        await writer.drain()

    async def _garbage(self, writer: asyncio.StreamWriter) -> None:
        writer.write(self._head(200, len(GARBAGE)) + GARBAGE)
        await writer.drain()

    async def _status(self, writer: asyncio.StreamWriter) -> None:
        body = b"Internal Server Error " * 50_000
        writer.write(self._head(self.status, len(body)) + body)
        await writer.drain()

    async def _trickle(self, writer: asyncio.StreamWriter) -> None:
        writer.write(self._head(200, None))
        await writer.drain()
        for byte in _cycle(HUGE_LINE):
            writer.write(byte)
            await writer.drain()
            await asyncio.sleep(self.interval_s)

    async def _huge(self, writer: asyncio.StreamWriter) -> None:
        await self._stream_huge(writer, declared=False)

    async def _huge_declared(self, writer: asyncio.StreamWriter) -> None:
        await self._stream_huge(writer, declared=True)

    async def _stream_huge(self, writer: asyncio.StreamWriter, *, declared: bool) -> None:
        writer.write(self._head(200, self.huge_bytes if declared else None))
        block = HUGE_LINE * (65536 // len(HUGE_LINE))
        sent = 0
        while sent < self.huge_bytes:
            writer.write(block)
            sent += len(block)
            await writer.drain()
        raise ConnectionResetError  # Connection: close after the body


def _cycle(data: bytes) -> Iterator[bytes]:
    while True:
        for i in range(len(data)):
            yield data[i : i + 1]


@contextlib.contextmanager
def serving(behaviour: Behaviour = "page", **kwargs: object) -> Iterator[MisbehavingMetricsServer]:
    """A started ``MisbehavingMetricsServer``, stopped on exit."""
    server = MisbehavingMetricsServer(behaviour=behaviour, **kwargs)  # type: ignore[arg-type]
    server.start()
    try:
        yield server
    finally:
        server.stop()
