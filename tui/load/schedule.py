"""The schedule: warm-ups, then when each request goes, under the concurrency cap.

It follows ``benchmark()`` in ``vllm/benchmarks/serve.py:786-1090`` (reference sections
4.3-4.4): ``num_warmups`` copies of the first prompt are sent and awaited first, under the
same concurrency cap, and measured by nobody; then one task per request is created at its
send time (:func:`~tui.load.arrivals.send_times`), each holding an
``asyncio.Semaphore(max_concurrency)`` while it runs; the run ends when they are gathered.

A run bounded by a duration instead (vtc's own) sends, cycling through the prompts, until
``duration_s`` has passed, then lets the ones in flight finish: with a finite rate the gaps
are bench serve's, not rescaled (:func:`~tui.load.arrivals.open_ended_times`), and a
request still waiting for a slot at the deadline is never sent; with an infinite rate it
is a closed loop that starts a request whenever one of the ``max_concurrency`` slots frees.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import replace

from tui.domain.workload import LoadSpec
from tui.load.arrivals import open_ended_times, send_times
from tui.load.errors import LoadError
from tui.load.prompts import PromptRequest

#: Sends one request: ``(key, prompt, arrival)``; ``arrival`` is when it was due.
Send = Callable[[int, PromptRequest, float], Awaitable[None]]
#: Sends one warm-up prompt, unmeasured.
WarmUp = Callable[[PromptRequest], Awaitable[object]]


class Dispatcher:
    """Creates the run's request tasks at their send times; :meth:`run` ends when all ended.

    The dispatcher owns its tasks: :meth:`cancel` cancels every one at once, and the
    runner gathers them (:attr:`tasks`) whatever happens.
    """

    def __init__(self, spec: LoadSpec, prompts: Sequence[PromptRequest], send: Send) -> None:
        if not prompts:
            raise LoadError("no prompts to send")
        self._spec = spec
        self._prompts = prompts
        self._send = send
        self._slots = asyncio.Semaphore(spec.max_concurrency) if spec.max_concurrency else None
        self._limiter: AbstractAsyncContextManager[object] = (
            self._slots if self._slots is not None and not spec.closed_loop else nullcontext()
        )
        self.tasks: list[asyncio.Task[None]] = []
        self.start: float | None = None  # perf_counter just before the first dispatch
        self.deadline = math.inf
        self.dispatched = 0  # requests whose task was created

    @property
    def connections_needed(self) -> int:
        """Connections worth opening before the start: as many as can be open at once.

        The cap (or, for a counted run, every prompt if fewer); uncapped, every prompt of a
        counted run sent all at once, else one second's arrivals (more open as needed). A
        connection that sits idle past the server's keep-alive timeout is closed by it and
        replaced on demand.
        """
        spec = self._spec
        counted = len(self._prompts) if spec.duration_s is None else None
        if spec.max_concurrency is not None:
            return min(spec.max_concurrency, counted or spec.max_concurrency)
        if math.isinf(spec.request_rate):
            return counted or 0
        return min(math.ceil(spec.request_rate), counted or math.ceil(spec.request_rate))

    async def warm_up(self, send: WarmUp) -> None:
        """``num_warmups`` copies of the first prompt under the cap (``serve.py:894-917``)."""
        count = self._spec.num_warmups
        if not count:
            return
        cap = self._spec.max_concurrency
        limiter: AbstractAsyncContextManager[object] = (
            asyncio.Semaphore(cap) if cap else nullcontext()
        )

        async def one(k: int) -> None:
            async with limiter:
                # Negative indexes keep the x-request-id of each warm-up unique.
                await send(replace(self._prompts[0], index=-1 - k))

        await asyncio.gather(*(one(k) for k in range(count)))

    async def run(self, on_start: Callable[[float], None]) -> None:
        """Dispatch every request and wait for them; ``on_start(start)`` at the start."""
        spec = self._spec
        start = self.start = time.perf_counter()
        on_start(start)
        if spec.duration_s is None:
            await self._counted(start)
        else:
            self.deadline = start + spec.duration_s
            await (self._closed() if spec.closed_loop else self._open_rate(start))
        await asyncio.gather(*self.tasks)

    def cancel(self) -> None:
        """Cancel every request task at once."""
        for task in self.tasks:
            task.cancel()

    # -- the three schedules --------------------------------------------------------------------
    async def _counted(self, start: float) -> None:
        # Mirrors serve.py:509-516 and 1011-1090: sleep to each send time, then start the
        # request's task.
        spec = self._spec
        delays = send_times(len(self._prompts), spec.request_rate, spec.burstiness, spec.seed)
        for prompt, delay in zip(self._prompts, delays, strict=True):
            wait = start + delay - time.perf_counter()
            if delay > 0 and wait > 0:
                await asyncio.sleep(wait)
            self._dispatch(prompt.index, prompt)

    async def _open_rate(self, start: float) -> None:
        spec = self._spec
        offsets: Iterator[float] = open_ended_times(spec.request_rate, spec.burstiness, spec.seed)
        for i, offset in enumerate(offsets):
            if start + offset >= self.deadline:
                return
            wait = start + offset - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            self._dispatch(*self._cycled(i))

    async def _closed(self) -> None:
        slots = self._slots
        assert slots is not None
        i = 0
        while (left := self.deadline - time.perf_counter()) > 0:
            try:
                await asyncio.wait_for(slots.acquire(), left)
            except TimeoutError:
                return
            if time.perf_counter() >= self.deadline:
                slots.release()
                return
            self._dispatch(*self._cycled(i))
            i += 1

    # -- one request ----------------------------------------------------------------------------
    def _cycled(self, i: int) -> tuple[int, PromptRequest]:
        prompt = self._prompts[i % len(self._prompts)]
        return i, (prompt if prompt.index == i else replace(prompt, index=i))

    def _dispatch(self, key: int, prompt: PromptRequest) -> None:
        self.dispatched += 1
        self.tasks.append(asyncio.create_task(self._one(key, prompt, time.perf_counter())))

    async def _one(self, key: int, prompt: PromptRequest, arrival: float) -> None:
        spec = self._spec
        slots = self._slots
        # In a timed run, a request that waits for a slot past the deadline is dropped.
        may_expire = spec.timed and slots is not None and not spec.closed_loop and slots.locked()
        try:
            async with self._limiter:
                if may_expire and time.perf_counter() >= self.deadline:
                    return  # never sent
                await self._send(key, prompt, arrival)
        finally:
            if spec.closed_loop and slots is not None:
                slots.release()
