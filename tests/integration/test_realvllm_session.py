"""The console's own composition (a mode's ``build``) against the real vLLM.

What the operator runs: ``vtc --vllm PATH -- serve MODEL ...`` builds this session. One run:
start -> ready -> telemetry -> load -> the run record in the store; then closing the
console while a load streams cancels the load, stops the server, and leaves no process.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from realvllm_support import (
    HANG_S,
    KV_64M,
    SETTLE_WAIT_S,
    STARTUP_TIMEOUT_S,
    assert_nothing_left,
    kv_bytes_per_token,
    tree,
    wait_gone,
)

from tui.domain.events import Exited, Failed, Launched, Ready, ServerState
from tui.domain.results import BenchResult, RunStatus
from tui.domain.telemetry import HostSample, ServerMetrics, SourceStatus
from tui.domain.workload import LoadProgress, LoadSpec
from tui.modes import ConsoleOptions, adapters, build_session
from tui.modes.adapters import STOP_GRACE_S
from tui.server.provision import ProvisionedVllm
from tui.session import LoadFinished, RunUpdated, SessionEvent, wait_for_state
from tui.store.history import RunStore

# timed: the session's load and telemetry on one server, alone (tests/suite_tiers.py)
pytestmark = [pytest.mark.realvllm, pytest.mark.timed]

CLOSE_GRACE_S = 120.0
"""The stop grace of this test's console: SIGKILL only for a vLLM that never exits."""


async def _wait_event(
    events: list[SessionEvent], test: object, timeout_s: float, what: str
) -> SessionEvent:
    assert callable(test)
    deadline = time.monotonic() + timeout_s
    while True:
        found = [e for e in events if test(e)]
        if found:
            return found[-1]
        assert time.monotonic() < deadline, f"no {what} within {timeout_s:g} s"
        await asyncio.sleep(0.05)


async def test_console_session_runs_the_loop_and_closes_clean(
    real_vllm: ProvisionedVllm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ConsoleOptions has no environment of its own: the supervisor merges over ours.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # The grace before SIGKILL when the console closes (read as the launcher is built).
    monkeypatch.setattr(adapters, "STOP_GRACE_S", CLOSE_GRACE_S)
    serve_args = [
        "serve",
        str(real_vllm.model),
        "--enforce-eager",
        "--kv-cache-memory-bytes",
        "64M",
        "--max-model-len",
        "2048",
    ]
    options = ConsoleOptions(
        vllm=str(real_vllm.vllm),
        serve_args=serve_args,
        data_dir=tmp_path,
        startup_timeout=STARTUP_TIMEOUT_S,
        poll_interval_s=0.5,
    )
    db = tmp_path / "runs.sqlite"
    session = build_session(options)
    events: list[SessionEvent] = []
    session.subscribe(events.append)
    assert session.info.initial_flags.kv_cache_memory_bytes == KV_64M
    pgid: int | None = None
    seen = []
    try:
        await session.start()
        record = await session.restart(session.info.initial_flags)
        assert record.id is not None and record.status is RunStatus.STARTING
        state = await wait_for_state(
            session, {ServerState.READY, ServerState.FAILED}, SETTLE_WAIT_S
        )
        assert state is ServerState.READY, f"{[e for e in events if isinstance(e, Failed)]}"
        (launched,) = [e for e in events if isinstance(e, Launched)]
        pgid = launched.pid
        seen = tree(pgid)

        # Telemetry flows: /metrics (started on Ready) and the host's view of the tree.
        metrics = await _wait_event(
            events,
            lambda e: isinstance(e, ServerMetrics) and e.status is SourceStatus.OK,
            HANG_S,
            "OK metrics sample",
        )
        assert isinstance(metrics, ServerMetrics) and metrics.kv_cache_usage == 0.0
        host = await _wait_event(
            events,
            lambda e: isinstance(e, HostSample) and (e.server_rss or 0) > 0,
            HANG_S,
            "host sample of the server tree",
        )
        assert isinstance(host, HostSample) and (host.server_processes or 0) >= 3

        spec = LoadSpec(input_len=64, output_len=128, num_prompts=32, max_concurrency=8, seed=1)
        result = await asyncio.wait_for(session.run_load(spec), timeout=HANG_S)
        assert isinstance(result, BenchResult)
        assert result.completed == 32 and result.failed == 0, result.errors
        assert result.total_output_tokens == 32 * 128
        assert any(isinstance(e, LoadFinished) and e.result == result for e in events)
        assert any(isinstance(e, LoadProgress) for e in events)

        run = session.current
        assert run is not None and run.id == record.id
        assert run.status is RunStatus.READY
        assert run.bench == result
        assert run.workload is not None and run.workload.num_prompts == 32
        tokens = KV_64M // kv_bytes_per_token(real_vllm.model)
        assert run.startup.kv_cache_tokens == tokens
        assert run.startup.max_concurrency == pytest.approx(tokens / 2048)
        assert run.startup.seconds_to_ready is not None and run.startup.seconds_to_ready > 0
        assert [s.name for s in run.startup.stages][-1] == "ready"
        assert run.log_path and Path(run.log_path).is_file()
        assert any(isinstance(e, Ready) for e in events)

        # Close the console while a long load streams: the polite path. The load is
        # cancelled first, so SIGTERM suffices: vLLM exits by itself, status 0 (SIGKILL, which
        # comes after the grace, would end it with -9). The grace is the hang guard here,
        # not the console's 10 s: vLLM's own shutdown has taken longer on two busy cores.
        long = LoadSpec(input_len=32, output_len=2000, num_prompts=16, max_concurrency=16)
        load = asyncio.create_task(session.run_load(long))
        await _wait_event(
            events,
            lambda e: isinstance(e, LoadProgress) and e.total == 16 and e.in_flight == 16,
            HANG_S,
            "16 open streams",
        )
        seen += [p for p in tree(pgid) if p not in seen]
        t0 = time.monotonic()
        await asyncio.wait_for(session.close(), timeout=CLOSE_GRACE_S + 60)
        took = time.monotonic() - t0
        print(f"close took {took:.1f} s (the console's grace: {STOP_GRACE_S:g} s)")
        assert took < CLOSE_GRACE_S, f"close took {took:.1f} s: SIGKILL was needed"
        partial = await asyncio.wait_for(load, timeout=HANG_S)
        assert partial is not None and partial.cancelled is True
        exited = [e for e in events if isinstance(e, Exited)]
        assert len(exited) == 1 and exited[0].requested and exited[0].exit_code == 0
        assert not [e for e in events if isinstance(e, Failed)]
        assert not await wait_gone(seen, 30)
        assert_nothing_left(None, seen, pgid)
    finally:
        await session.close()

    # Every run is in the store, with what it produced.
    store = RunStore(db)
    try:
        stored, cancelled = sorted(store.list(), key=lambda r: r.id or 0)
    finally:
        store.close()
    assert stored.id == record.id
    # The store holds what the console showed last: the first load on the server's run, the
    # cancelled one kept as its own run (every load is kept), both ended with the server.
    assert session.current is not None
    assert stored.bench is not None and stored.bench == session.current.bench
    assert cancelled.load_of == record.id and cancelled.bench == partial
    assert cancelled.bench is not None and not cancelled.bench.complete
    assert stored.status is cancelled.status is RunStatus.STOPPED  # never READY once gone
    assert stored.startup.kv_cache_tokens == KV_64M // kv_bytes_per_token(real_vllm.model)
    assert stored.exit_code == 0
    assert any(isinstance(e, RunUpdated) for e in events)
