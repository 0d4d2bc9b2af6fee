"""Injected fixed delays (``--sim-fixed-*``): a stream's tokens written from timer callbacks.

Made for benchmarking load clients, where the simulator must stay far from being the
bottleneck at a thousand streams on a shared core. A coroutine per stream waking per
token costs tens of microseconds per token through aiohttp's writer; here each due token
costs one ``loop.call_at`` callback and one ``transport.write`` of a pre-built HTTP chunk.

Token ``k`` is due at ``arrival + ttft + k·itl``. When the callback runs late (the server
fell behind), every token due by then goes out in one write, so the schedule never
drifts. When the client stops reading and the socket's write buffer passes
``HIGH_WATER`` bytes, writing pauses (polled every millisecond) and resumes with
everything due; that is the back-pressure a real server applies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tui.sim.argv import FixedTiming

HIGH_WATER = 256 * 1024
PAUSE_S = 0.001


class FixedStream:
    """Writes tokens ``start .. total-1`` of one response on the injected schedule.

    ``frames(k, last)`` returns the SSE bytes of tokens ``k..last``; they are framed as one
    HTTP/1.1 chunk (the response must already be prepared with chunked encoding and have
    written its first bytes, so its headers are out). :attr:`done` resolves to True when
    the last token is written, False when the client went away.
    """

    def __init__(
        self,
        transport: asyncio.BaseTransport,
        frames: Callable[[int, int], bytes],
        total: int,
        timing: FixedTiming,
        arrival: float,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        if not isinstance(transport, asyncio.WriteTransport):
            raise TypeError("a writable transport is needed")
        self._transport = transport
        self._frames = frames
        self._total = total
        self._timing = timing
        self._arrival = arrival
        self._next = 0
        self._handle: asyncio.TimerHandle | None = None
        self.done: asyncio.Future[bool] = self._loop.create_future()

    def start(self, k: int) -> None:
        """Schedule token ``k`` and the rest."""
        self._next = k
        if k >= self._total:
            self._finish(True)
            return
        self._handle = self._loop.call_at(self._arrival + self._timing.offset(k), self._tick)

    def cancel(self) -> None:
        """Stop writing (the handler is going away)."""
        if self._handle is not None:
            self._handle.cancel()
        self._finish(False)

    def _finish(self, ok: bool) -> None:
        if not self.done.done():
            self.done.set_result(ok)

    def _tick(self) -> None:
        self._handle = None
        transport = self._transport
        if transport.is_closing():
            self._finish(False)
            return
        if transport.get_write_buffer_size() > HIGH_WATER:
            self._handle = self._loop.call_later(PAUSE_S, self._tick)
            return
        k = self._next
        last = self._total - 1
        if self._timing.itl_s > 0:
            elapsed = self._loop.time() - self._arrival - self._timing.ttft_s
            last = min(last, max(k, int(elapsed / self._timing.itl_s)))
        data = self._frames(k, last)
        transport.write(b"%x\r\n%b\r\n" % (len(data), data))
        self.start(last + 1)
