"""Poller: never overlaps itself, survives failures, stops cleanly, takes a new interval.

No assertion here is about speed: waits are for events, each bounded by a generous timeout.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tui.domain.telemetry import SourceStatus
from tui.telemetry.poller import Poller, PollFailure

WAIT = 10.0  # upper bound on any wait for an event below; never reached when things work


class SlowAsyncSource:
    """Each sample takes longer than the poll interval; counts concurrent calls."""

    def __init__(self, duration: float) -> None:
        self.duration = duration
        self.active = 0
        self.max_active = 0
        self.calls = 0

    async def sample(self) -> int:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await asyncio.sleep(self.duration)
            self.calls += 1
            return self.calls
        finally:
            self.active -= 1


class SlowSyncSource:
    """A blocking sample (like NVML), run by the poller in a worker thread."""

    def __init__(self, duration: float) -> None:
        self.duration = duration
        self.lock = threading.Lock()
        self.active = 0
        self.max_active = 0
        self.calls = 0
        self.threads: set[int] = set()
        self.finished = 0

    def sample(self) -> int:
        with self.lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            self.threads.add(threading.get_ident())
        time.sleep(self.duration)
        with self.lock:
            self.active -= 1
            self.calls += 1
            self.finished += 1
            return self.calls


class Collector:
    def __init__(self, want: int) -> None:
        self.items: list[object] = []
        self.want = want
        self.enough = asyncio.Event()

    def __call__(self, item: object) -> None:
        self.items.append(item)
        if len(self.items) >= self.want:
            self.enough.set()


def poll_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("poll:")]


async def test_slow_async_source_never_overlaps() -> None:
    source = SlowAsyncSource(duration=0.03)
    got = Collector(want=5)
    poller = Poller(source.sample, got, interval=0.001, name="slow-async")
    poller.start()
    await asyncio.wait_for(got.enough.wait(), WAIT)
    await poller.stop()
    assert source.max_active == 1
    assert got.items[:5] == [1, 2, 3, 4, 5]  # delivered in order, none lost or doubled
    assert not poller.running and poll_tasks() == []


async def test_slow_sync_source_runs_in_a_thread_without_overlap() -> None:
    source = SlowSyncSource(duration=0.03)
    got = Collector(want=4)
    poller = Poller(source.sample, got, interval=0.001, name="slow-sync")
    poller.start()
    await asyncio.wait_for(got.enough.wait(), WAIT)
    await poller.stop()
    assert source.max_active == 1
    assert threading.get_ident() not in source.threads  # never on the event loop's thread
    assert got.items[:4] == [1, 2, 3, 4]


async def test_stop_waits_for_a_sync_sample_in_flight() -> None:
    entered = threading.Event()
    release = threading.Event()
    finished: list[bool] = []

    def blocking() -> int:
        entered.set()
        release.wait(WAIT)
        finished.append(True)
        return 1

    poller = Poller(blocking, lambda _: None, interval=1.0, name="blocking")
    poller.start()
    assert await asyncio.to_thread(entered.wait, WAIT)
    stopping = asyncio.create_task(poller.stop())
    await asyncio.sleep(0)
    assert not stopping.done()  # still waiting for the thread to come back
    release.set()
    await asyncio.wait_for(stopping, WAIT)
    assert finished == [True]  # the source can now be closed safely
    assert poll_tasks() == []


async def test_exceptions_are_reported_and_polling_goes_on() -> None:
    calls = 0

    async def flaky() -> int:
        nonlocal calls
        calls += 1
        if calls % 2:
            raise ConnectionError("refused")
        return calls

    failures: list[PollFailure] = []
    got = Collector(want=2)
    poller = Poller(flaky, got, interval=0.001, on_failure=failures.append, name="flaky")
    poller.start()
    await asyncio.wait_for(got.enough.wait(), WAIT)
    await poller.stop()
    assert got.items[:2] == [2, 4]
    assert len(failures) >= 2 and poller.failures == len(failures)
    assert failures[0].poller == "flaky"
    assert failures[0].status is SourceStatus.DOWN
    assert failures[0].message == "ConnectionError: refused"
    assert not failures[0].in_callback


async def test_a_failing_callback_does_not_kill_the_poller() -> None:
    delivered: list[int] = []
    failures: list[PollFailure] = []
    enough = asyncio.Event()

    def callback(n: int) -> None:
        delivered.append(n)
        if len(delivered) >= 3:
            enough.set()
        raise RuntimeError("widget gone")

    counter = iter(range(1000))

    async def sample() -> int:
        return next(counter)

    poller = Poller(sample, callback, interval=0.001, on_failure=failures.append)
    poller.start()
    await asyncio.wait_for(enough.wait(), WAIT)
    await poller.stop()
    assert delivered[:3] == [0, 1, 2]
    assert failures and failures[0].in_callback
    assert failures[0].message == "RuntimeError: widget gone"


async def test_interval_change_wakes_a_sleeping_poller() -> None:
    got = Collector(want=1)

    async def sample() -> str:
        return "tick"

    poller = Poller(sample, got, interval=3600.0, name="retime")
    poller.start()
    await asyncio.wait_for(got.enough.wait(), WAIT)  # the first round runs at once
    assert len(got.items) == 1  # ...then it sleeps for an hour
    got.want, got.enough = 3, asyncio.Event()
    poller.interval = 0.001
    await asyncio.wait_for(got.enough.wait(), WAIT)
    await poller.stop()
    assert poller.interval == 0.001


async def test_poll_now_and_restart() -> None:
    got = Collector(want=2)

    async def sample() -> int:
        return 1

    poller = Poller(sample, got, interval=3600.0)
    poller.start()
    poller.start()  # idempotent: still one task
    assert len(poll_tasks()) == 1
    poller.poll_now()
    await asyncio.wait_for(got.enough.wait(), WAIT)
    await poller.stop()
    await poller.stop()  # stopping twice is harmless
    got.want, got.enough = 3, asyncio.Event()
    poller.start()
    await asyncio.wait_for(got.enough.wait(), WAIT)
    await poller.stop()
    assert poll_tasks() == []


async def test_no_samples_after_stop() -> None:
    source = SlowAsyncSource(duration=0.0)
    got = Collector(want=3)
    poller = Poller(source.sample, got, interval=0.001)
    poller.start()
    await asyncio.wait_for(got.enough.wait(), WAIT)
    await poller.stop()
    count = len(got.items)
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(got.items) == count
    assert source.active == 0  # the in-flight sample was cancelled, not left running


@pytest.mark.parametrize("bad", [0, -1.0, float("nan")])
def test_bad_interval_is_a_clear_error(bad: float) -> None:
    with pytest.raises(ValueError, match="poll interval"):
        Poller(lambda: 1, lambda _: None, interval=bad)
