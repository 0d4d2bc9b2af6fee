"""A demo session against the simulator: a run keeps its load's server-side latency and its
series, the panels are told how fresh each source is, and the simulated GPU reads freed
once its simulator has stopped."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tui.domain.events import ServerState
from tui.domain.gpus import RELEASED_SIMULATED_GPU
from tui.domain.results import RunRecord
from tui.domain.telemetry import GpuSample, SourceStatus
from tui.domain.workload import LoadSpec
from tui.modes import ConsoleOptions, build_session
from tui.session import RunUpdated, SessionEvent, wait_for_state
from tui.session.port import TelemetryStatus
from tui.store.history import RunStore

LOAD = LoadSpec(input_len=32, output_len=16, num_prompts=8, max_concurrency=4)


async def test_a_demo_run_records_its_server_side_latency_and_series_after_a_load(
    tmp_path: Path,
) -> None:
    options = ConsoleOptions(demo=True, sim_speed=50, data_dir=tmp_path, poll_interval_s=0.2)
    session = build_session(options)
    events: list[SessionEvent] = []
    counted = asyncio.Event()
    released = asyncio.Event()
    told = asyncio.Event()  # the panels were told the page's GPU is current

    def watch(event: SessionEvent) -> None:
        events.append(event)
        if isinstance(event, TelemetryStatus) and event.gpu.state is SourceStatus.OK:
            told.set()
        if isinstance(event, RunUpdated) and event.record.server_latency is not None:
            counted.set()
        if isinstance(event, GpuSample) and event.message == RELEASED_SIMULATED_GPU:
            released.set()

    session.subscribe(watch)
    await session.start()
    try:
        assert await wait_for_state(session, {ServerState.READY, ServerState.FAILED}, 60) is (
            ServerState.READY
        )
        result = await session.run_load(LOAD)
        assert result is not None and result.completed == LOAD.num_prompts
        await asyncio.wait_for(counted.wait(), 60)  # once the server counted every request
        run = session.current
        assert run is not None and run.server_latency is not None
        ttft, e2el = run.server_latency.ttft, run.server_latency.e2el
        assert ttft is not None and ttft.count == LOAD.num_prompts and ttft.p50 is not None
        assert e2el is not None and e2el.count == LOAD.num_prompts
        assert any(p.kv_cache_usage is not None for p in run.series)
        assert any(p.gpu_mem_used_bytes for p in run.series)  # the simulator's own gauges
        # A status is reported once an interval: wait for one after the page's GPU came.
        await asyncio.wait_for(told.wait(), 60)
        status = next(e for e in reversed(events) if isinstance(e, TelemetryStatus))
        assert status.gpu.state is SourceStatus.OK and status.metrics is not None
        assert status.server_gpus == frozenset({0})

        await session.stop_server()
        await asyncio.wait_for(released.wait(), 30)
        gpu = session.history.ring("gpu_mem_used_bytes").latest
        assert gpu is not None and gpu[1] == 0.0  # the freed reading, in the history too
    finally:
        await session.close()

    (stored,) = RunStore(tmp_path / "demo-runs.sqlite").list()
    assert isinstance(stored, RunRecord) and stored.server_latency == run.server_latency
    assert len(stored.series) >= len(run.series) > 0  # the stop recorded the whole series
