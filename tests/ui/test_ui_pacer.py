"""While a load runs the console refreshes at a bounded rate (issue 23): events reach the
screen in one batch per period, samples coalesced, nothing lost, the load's end at once."""

from __future__ import annotations

from collections.abc import Callable

from ui_fakes import FakeSession, load_progress, server_metrics

from tui.domain.events import LogLine, ServerState
from tui.domain.results import BenchResult
from tui.session import LoadFinished, SessionEvent
from tui.ui.app import create_app
from tui.ui.pacer import EventPacer


class Timers:
    """The app's timer, by hand: the test says when a period has passed."""

    def __init__(self) -> None:
        self.pending: list[Callable[[], None]] = []

    def later(self, delay_s: float, callback: Callable[[], None]) -> None:
        assert delay_s == 0.5
        self.pending.append(callback)

    def fire(self) -> None:
        pending, self.pending = self.pending, []
        for callback in pending:
            callback()


def test_a_burst_during_a_load_is_one_batch_per_period_and_nothing_is_lost() -> None:
    seen: list[SessionEvent] = []
    timers = Timers()
    pacer = EventPacer(seen.append, timers.later, period_s=0.5)
    pacer.push(LogLine("before the load"))
    assert seen == [LogLine("before the load")]  # no load: at once
    pacer.push(load_progress(4, 300.0))
    lines = [LogLine(f"line {i}") for i in range(50)]
    for line in lines:
        pacer.push(line)
        pacer.push(server_metrics())  # one a line: only the newest is worth drawing
    assert seen == [LogLine("before the load")] and len(timers.pending) == 1
    timers.fire()
    assert seen[1:52] == [load_progress(4, 300.0), *lines]
    assert seen[52:] == [server_metrics()] and pacer.batches == 1
    pacer.push(load_progress(8, 310.0))
    finished = LoadFinished(BenchResult(completed=64))
    pacer.push(finished)  # the end flushes what is held and goes through at once
    assert seen[-2:] == [load_progress(8, 310.0), finished] and pacer.batches == 2
    timers.fire()  # the timer set before the end finds nothing
    pacer.push(LogLine("after"))
    assert seen[-1] == LogLine("after") and not timers.pending


async def test_the_console_batches_a_loads_events_and_shows_its_end_at_once() -> None:
    session = FakeSession(state=ServerState.READY)
    app = create_app(session, clock=None, load_refresh_s=0.5)
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.pacer is not None
        session.emit(load_progress(30, 610.0))
        for i in range(40):
            session.emit(LogLine(f"INFO: request {i} finished"))
        session.emit(LoadFinished(BenchResult(completed=64, output_throughput=700.0)))
        await pilot.pause()
        # However late this loop ran, what was held came in batches, in order, all of it.
        assert 1 <= app.pacer.batches <= 41
        lines = [line for line in app.main_screen.server_panel.tail.lines if "request" in line]
        assert lines == [f"INFO: request {i} finished" for i in range(40)]
