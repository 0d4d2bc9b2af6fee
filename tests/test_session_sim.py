"""The tuning loop end to end through the real services, with the simulator as the server.

Built with the same ``build_session`` as ``vtc --demo``. This plays the seed-000 story
headless: a start that fails on KV capacity, its diagnosed fix applied, a ready server, a
load run recorded on the board and in the store.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import psutil
import pytest

from tui.domain.events import Failed, Ready, ServerState
from tui.domain.flags.serve_diff import diff_flags
from tui.domain.results import RunStatus
from tui.domain.workload import LoadSpec
from tui.modes import ConsoleOptions, build_session
from tui.modes.common import assemble
from tui.modes.demo import DEMO_PRESET, DemoMode
from tui.session import LoadFinished, RunUpdated, SessionEvent, wait_for_state
from tui.store.history import RunStore

# slow tier: the services drive the simulator's server process in real time.
pytestmark = pytest.mark.slow


async def test_seed_000_story_through_the_services(tmp_path: Path) -> None:
    options = ConsoleOptions(demo=True, sim_speed=50, data_dir=tmp_path, poll_interval_s=0.2)
    session = build_session(options)
    events: list[SessionEvent] = []
    session.subscribe(events.append)
    assert session.info.initial_flags.model == "meta-llama/Llama-3.1-8B-Instruct"
    await session.start()  # the demo autostarts its preset
    try:
        assert await wait_for_state(session, {ServerState.READY, ServerState.FAILED}, 60) is (
            ServerState.READY
        )
        first = session.current
        assert first is not None and first.status is RunStatus.READY
        assert first.startup.kv_cache_tokens and first.startup.kv_cache_tokens > 512

        # 1. max_model_len far above capacity: a failure card with vLLM's numbers and a fix.
        await session.restart(first.flags.replace(max_model_len=30576))
        assert await wait_for_state(session, {ServerState.READY, ServerState.FAILED}, 60) is (
            ServerState.FAILED
        )
        failed = session.current
        assert failed is not None and failed.diagnosis is not None
        assert failed.status is RunStatus.FAILED
        assert failed.diagnosis.kind == "kv_cache_too_small"
        assert failed.diagnosis.facts["max_model_len"] == 30576
        estimated = failed.diagnosis.facts["estimated_max_model_len"]
        fix = failed.diagnosis.fixes[0]
        assert 0 < fix.set["max_model_len"] <= estimated
        assert any(isinstance(e, Failed) for e in events)

        # 2. Apply the fix and restart: ready.
        fixed_flags = failed.flags.replace(**fix.set)
        await session.restart(fixed_flags)
        assert await wait_for_state(session, {ServerState.READY, ServerState.FAILED}, 60) is (
            ServerState.READY
        )
        assert any(isinstance(e, Ready) for e in events)

        # 3. Load: a result lands on the current run.
        result = await session.run_load(
            LoadSpec(input_len=32, output_len=16, num_prompts=8, max_concurrency=4)
        )
        assert result is not None and result.completed == 8 and result.failed == 0
        assert result.total_output_tokens == 8 * 16
        assert any(isinstance(e, LoadFinished) and e.result is result for e in events)
        ready = session.current
        assert ready is not None and ready.bench == result
        assert [c.name for c in diff_flags(session.runs[0].flags, ready.flags)] == ["max_model_len"]
        server_pid = session.pid
        assert server_pid is not None
    finally:
        await session.close()
    assert not psutil.pid_exists(server_pid) or psutil.Process(server_pid).status() == "zombie"

    # Every run, the failed start included, is in the store with its final state.
    stored = RunStore(tmp_path / "demo-runs.sqlite").list()
    # Each card keeps its own end: replaced by the next run, failed, stopped at close.
    assert [r.status for r in stored] == [RunStatus.REPLACED, RunStatus.FAILED, RunStatus.STOPPED]
    assert stored[1].diagnosis is not None and stored[1].diagnosis.kind == "kv_cache_too_small"
    assert stored[2].bench is not None and stored[2].bench.completed == 8
    assert any(isinstance(e, RunUpdated) for e in events)
    assert DEMO_PRESET in {p.name for p in session.info.presets}


async def test_restart_waits_for_the_old_trees_gpu_memory(tmp_path: Path) -> None:
    options = ConsoleOptions(demo=True, sim_speed=50, data_dir=tmp_path, poll_interval_s=0.2)
    asked: list[set[int]] = []
    events: list[SessionEvent] = []

    async def release(pids: set[int]) -> str | None:
        asked.append(set(pids))
        # By the time the wait is asked for, the old tree is already stopped.
        assert all(not psutil.pid_exists(p) or psutil.Process(p).status() == "zombie" for p in pids)
        return "GPU memory of the old server still held after 30 s; starting anyway"

    info, services = DemoMode().parts(options)
    services.release = release  # what the local-vLLM mode wires in NVML mode
    session = assemble(info, services, poll_interval_s=options.poll_interval_s)
    session.subscribe(events.append)
    await session.start()
    try:
        await wait_for_state(session, {ServerState.READY, ServerState.FAILED}, 60)
        first_pid = session.pid
        assert first_pid is not None
        await session.restart(session.info.initial_flags)
        assert len(asked) == 1 and first_pid in asked[0]
        assert any(
            getattr(e, "text", "").startswith("[vtc] GPU memory of the old server") for e in events
        )
        assert await wait_for_state(session, {ServerState.READY, ServerState.FAILED}, 60) is (
            ServerState.READY
        )
    finally:
        await session.close()


async def test_a_cancelled_load_keeps_the_runs_completed_result(tmp_path: Path) -> None:
    options = ConsoleOptions(demo=True, sim_speed=50, data_dir=tmp_path, poll_interval_s=0.2)
    session = build_session(options)
    await session.start()
    try:
        await wait_for_state(session, {ServerState.READY, ServerState.FAILED}, 60)
        first = await session.run_load(
            LoadSpec(input_len=16, output_len=8, num_prompts=4, max_concurrency=2)
        )
        assert first is not None and session.current is not None
        assert session.current.bench == first

        long_load = asyncio.create_task(
            session.run_load(
                LoadSpec(input_len=16, output_len=400, num_prompts=200, max_concurrency=1)
            )
        )
        await asyncio.sleep(0.5)
        await session.cancel_load()
        partial = await asyncio.wait_for(long_load, 30)
        assert partial is not None and partial.cancelled is True
        assert session.current.bench == first  # the card keeps the completed numbers
    finally:
        await session.close()
