"""Run a source's ``sample()`` at an interval, never overlapping itself.

One asyncio task per poller. Each round starts ``interval`` seconds after the previous
round *started*; a round that takes longer than the interval is followed by the next one
as soon as it finishes, so slow sources never pile up calls. Synchronous sources (NVML,
psutil) run in a worker thread through ``asyncio.to_thread`` so they never block the
event loop (the UI). A failing ``sample()`` or callback is reported, and polling goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from tui.domain.telemetry import SourceStatus

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class PollFailure:
    """A round that produced no sample: ``sample()`` or the callback raised."""

    poller: str
    t: float  # monotonic seconds
    status: SourceStatus  # DOWN: the source may come back on the next round
    message: str  # "ExceptionType: text", shown as-is
    in_callback: bool = False  # True if the sample was fine and the callback raised


class Poller(Generic[T]):
    """Poll ``sample`` every ``interval`` seconds and hand each result to ``on_sample``.

    ``sample`` may be a plain function (run in a thread) or a coroutine function (an
    ``async def`` function or bound method).
    ``on_sample`` and ``on_failure`` run on the event loop; either may return an awaitable,
    which is awaited before the next round. Use from the event loop's thread only.
    """

    def __init__(
        self,
        sample: Callable[[], T] | Callable[[], Awaitable[T]],
        on_sample: Callable[[T], object],
        *,
        interval: float = 1.0,
        on_failure: Callable[[PollFailure], object] | None = None,
        name: str = "poller",
        stop_grace_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sample = sample
        self._is_async = inspect.iscoroutinefunction(sample)
        self._on_sample = on_sample
        self._on_failure = on_failure
        self.name = name
        self._interval = _check_interval(interval)
        self._stop_grace_s = stop_grace_s
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._thread_call: asyncio.Task[Any] | None = None
        self._wake = asyncio.Event()
        self._now = False
        self.rounds = 0  # rounds finished, good or bad
        self.failures = 0
        self.last_failure: PollFailure | None = None

    @property
    def interval(self) -> float:
        """Seconds between the starts of two rounds. Setting it takes effect at once."""
        return self._interval

    @interval.setter
    def interval(self, value: float) -> None:
        self._interval = _check_interval(value)
        self._wake.set()  # a sleeping poller recomputes its wait with the new interval

    @property
    def running(self) -> bool:
        """True between ``start()`` and ``stop()``."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start polling (the first round runs at once). Needs a running loop; idempotent."""
        if self.running:
            return
        self._wake = asyncio.Event()  # fresh per run: an Event binds to the loop it waits on
        self._now = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"poll:{self.name}")

    def poll_now(self) -> None:
        """Run the next round as soon as the current one (if any) is done."""
        self._now = True
        self._wake.set()

    async def stop(self) -> None:
        """Cancel polling and wait until the task is gone.

        A synchronous ``sample()`` cannot be interrupted inside its thread: ``stop()`` waits
        up to ``stop_grace_s`` for it to return, so the source can be closed safely after.
        """
        task, self._task = self._task, None
        if task is None:
            return
        if task is asyncio.current_task():
            raise RuntimeError("Poller.stop() cannot be awaited from its own callback")
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        call, self._thread_call = self._thread_call, None
        if call is not None and not call.done():
            await asyncio.wait({call}, timeout=self._stop_grace_s)
        if call is not None and call.done() and not call.cancelled():
            call.exception()  # mark retrieved: the round it belonged to is gone

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await self._round()
            self.rounds += 1
            while not self._now:
                remaining = started + self._interval - loop.time()
                if remaining <= 0:
                    break
                self._wake.clear()
                # asyncio.timeout, not wait_for: on 3.11 wait_for can lose a cancellation
                # that meets the wake-up, and this loop would outlive its stop().
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(remaining):
                        await self._wake.wait()
            self._now = False

    async def _round(self) -> None:
        try:
            result = await self._call_sample()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a failing source is reported; polling goes on
            await self._report(exc, in_callback=False)
            return
        try:
            delivered = self._on_sample(result)
            if inspect.isawaitable(delivered):
                await delivered
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a failing consumer is reported; polling goes on
            await self._report(exc, in_callback=True)

    async def _call_sample(self) -> T:
        if self._is_async:
            return await cast(Callable[[], Awaitable[T]], self._sample)()
        # Shielded so that stop() can cancel this task yet still wait for the thread.
        self._thread_call = asyncio.ensure_future(asyncio.to_thread(self._sample))
        result = await asyncio.shield(self._thread_call)
        self._thread_call = None
        if inspect.isawaitable(result):  # a plain function that returned a coroutine
            result = await result
        return cast(T, result)

    async def _report(self, exc: Exception, *, in_callback: bool) -> None:
        text = str(exc).strip()
        failure = PollFailure(
            poller=self.name,
            t=self._clock(),
            status=SourceStatus.DOWN,
            message=f"{type(exc).__name__}: {text}" if text else type(exc).__name__,
            in_callback=in_callback,
        )
        self.failures += 1
        self.last_failure = failure
        log.debug("poller %s: %s", self.name, failure.message, exc_info=exc)
        if self._on_failure is None:
            return
        try:
            reported = self._on_failure(failure)
            if inspect.isawaitable(reported):
                await reported
        except asyncio.CancelledError:
            raise
        except Exception:  # the failure handler itself failed: log it, keep polling
            log.exception("poller %s: on_failure raised", self.name)


def _check_interval(value: float) -> float:
    if not value > 0:  # also rejects NaN
        raise ValueError(f"poll interval must be a positive number of seconds, got {value!r}")
    return float(value)
