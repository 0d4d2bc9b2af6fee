"""The console's lane: ``x`` while the previous server is being stopped withdraws the next
launch (issue 17: a trial ran after ``x``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest

from tui.domain.events import ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import BenchResult, RunRecord, SweepTag
from tui.domain.workload import LoadSpec
from tui.session.port import LaunchWithdrawn, SessionEvent
from tui.tune.lanes import LaneInterrupted
from tui.tune.session_lane import SessionLane


class StoppingTarget:
    """A session whose restart stops the old server (until ``stopped`` is set), then asks
    ``proceed`` before it would launch, as ``Session.restart`` does."""

    def __init__(self) -> None:
        self.state = ServerState.READY
        self.current: RunRecord | None = None
        self.base_url: str | None = None
        self.stopping = asyncio.Event()
        self.stopped = asyncio.Event()
        self.launched: list[ServeFlags] = []

    def subscribe(self, callback: Callable[[SessionEvent], None]) -> None:
        pass

    async def restart(
        self,
        flags: ServeFlags,
        sweep: SweepTag | None = None,
        *,
        proceed: Callable[[], bool] | None = None,
    ) -> RunRecord:
        self.state = ServerState.STOPPING
        self.stopping.set()
        await self.stopped.wait()
        if proceed is not None and not proceed():
            raise LaunchWithdrawn("withdrawn")
        self.launched.append(flags)
        self.state = ServerState.STARTING
        return RunRecord(flags=flags)

    async def run_load(self, spec: LoadSpec, model: str | None = None) -> BenchResult | None:
        return None

    async def cancel_load(self) -> None:
        pass

    async def stop_server(self) -> None:
        self.state = ServerState.STOPPED


async def test_a_stop_while_the_old_server_stops_launches_nothing() -> None:
    target = StoppingTarget()
    async with httpx.AsyncClient() as client:
        lane = SessionLane(target, client)
        start = asyncio.ensure_future(
            lane.start(ServeFlags(model="m"), SweepTag(sweep_id="s", trial=2))
        )
        await target.stopping.wait()
        await lane.abort()  # x, while the previous trial's server is still stopping
        target.stopped.set()
        with pytest.raises(LaneInterrupted, match="stopped before the trial's server started"):
            await start
        assert target.launched == []
        with pytest.raises(LaneInterrupted):  # and no later trial either
            await lane.start(ServeFlags(model="m"), SweepTag(sweep_id="s", trial=3))
