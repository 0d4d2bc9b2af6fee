"""The console's sweeps on a cluster: the composer's choice reaches the mode's lanes.

The sweep service builds the sweep's lanes with the mode's cluster builder (Ray's, in a
demo or local console) instead of the console's own server, runs the strategy over them
and lets them go at the end; a console without a builder (attached) refuses in one line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from fakes.sweep_lanes import ScriptedLane

from tui.domain.errors import VtcError
from tui.domain.events import ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import BenchResult, RunRecord, SweepTag
from tui.domain.sweep import SweepSpec, SweepState, SweepStatus
from tui.domain.sweep.cluster import ClusterChoice
from tui.domain.workload import LoadSpec
from tui.session.port import SessionEvent, SweepUpdated
from tui.tune.lanes import ClusterRun
from tui.tune.service import SweepService

SPEC = SweepSpec.model_validate(
    {
        "name": "on-ray",
        "strategy": "grid",
        "base": {"model": "m"},
        "parameters": {"max_num_seqs": [1, 2, 3, 4]},
        "workload": {},
    }
)


class IdleTarget:
    """The console's session: a cluster sweep never touches it."""

    state = ServerState.IDLE
    current: RunRecord | None = None
    base_url: str | None = None

    def subscribe(self, callback: Callable[[SessionEvent], None]) -> None:
        pass

    async def restart(
        self,
        flags: ServeFlags,
        sweep: SweepTag | None = None,
        *,
        proceed: Callable[[], bool] | None = None,
    ) -> RunRecord:
        raise AssertionError("a cluster sweep started the console's own server")

    async def run_load(
        self, spec: LoadSpec, model: str | None = None, goodput: object = None
    ) -> BenchResult | None:
        raise AssertionError("a cluster sweep ran a load on the console's server")

    async def fresh_metrics(self) -> None:
        return None

    async def cancel_load(self) -> None:
        pass

    async def stop_server(self) -> None:
        pass


async def test_a_sweep_on_a_cluster_runs_on_the_builders_lanes_and_lets_them_go(
    tmp_path: Path,
) -> None:
    asked: list[ClusterChoice] = []
    closed = asyncio.Event()
    lanes = [ScriptedLane(name="node-a gpu 0"), ScriptedLane(name="node-b gpu 0")]

    async def build(
        spec: SweepSpec, choice: ClusterChoice, on_progress: Callable[[str], None]
    ) -> ClusterRun:
        asked.append(choice)
        on_progress("node-a gpu 0: waiting for the cluster")

        async def close() -> None:
            closed.set()

        return ClusterRun(list(lanes), close)

    seen: list[SweepStatus] = []
    ended = asyncio.Event()

    def emit(event: SessionEvent) -> None:
        if isinstance(event, SweepUpdated):
            seen.append(event.status)
            if not event.status.live:
                ended.set()

    svc = SweepService(data_dir=tmp_path, client=httpx.AsyncClient, cluster=build, emit=emit)
    svc.bind(IdleTarget())
    choice = ClusterChoice(address="head:6379")
    svc.start(SPEC, cluster=choice)
    await asyncio.wait_for(ended.wait(), 60)
    await svc.stop()  # returns once the sweep's task ended (its lanes let go)
    assert asked == [choice] and closed.is_set()
    final = seen[-1]
    assert final.state is SweepState.DONE and final.starts == 4
    assert {t.lane for t in final.trials} == {"node-a gpu 0", "node-b gpu 0"}
    assert all(lane.starts for lane in lanes)


async def test_a_console_without_a_cluster_builder_refuses_in_one_line(tmp_path: Path) -> None:
    svc = SweepService(data_dir=tmp_path, emit=lambda _: None, client=httpx.AsyncClient)
    svc.bind(IdleTarget())
    with pytest.raises(VtcError, match="own server only") as caught:
        svc.start(SPEC, cluster=ClusterChoice(gpus=2))
    assert "\n" not in caught.value.one_line() and not svc.running
