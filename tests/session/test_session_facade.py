"""The Session facade over services built from fakes: the tuning loop's sequencing."""

from __future__ import annotations

import asyncio

import pytest
from fakes.runner import FakeRunner
from fakes.runs import MemoryRunStore
from fakes.servers import FakeExisting, FakeLauncher
from fakes.sources import FakeGpu, FakeMetrics

from tui.domain.diagnosis import Diagnosis
from tui.domain.errors import VtcError
from tui.domain.events import ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.preflight import KvEstimate
from tui.domain.results import BenchResult, RunRecord, RunStatus
from tui.domain.workload import LoadSpec
from tui.session import Session, SessionEvent, SessionInfo
from tui.session.bus import EventBus
from tui.session.hub import TelemetryHub
from tui.session.loads import LoadService
from tui.session.port import LoadFinished
from tui.session.preflight import Preflight
from tui.session.runbook import RunBook
from tui.session.slot import ServerSlot

FLAGS = ServeFlags(model="m")


def build(
    *,
    launcher: FakeLauncher | None = None,
    existing: FakeExisting | None = None,
    runner: FakeRunner | None = None,
    store: MemoryRunStore | None = None,
    estimate: KvEstimate | None = None,
    release: object = None,
    autostart: bool = False,
) -> tuple[Session, list[SessionEvent], MemoryRunStore]:
    bus, store = EventBus(), store or MemoryRunStore()
    events: list[SessionEvent] = []
    bus.subscribe(events.append)
    slot = ServerSlot(launcher=launcher, existing=existing)
    hub = TelemetryHub(emit=bus.emit, interval_s=0.01, gpu=FakeGpu(), metrics=FakeMetrics())
    session = Session(
        SessionInfo(label="test", initial_flags=FLAGS, autostart=autostart, port=8123),
        bus=bus,
        book=RunBook(store, store.list(), bus.emit),
        slot=slot,
        hub=hub,
        preflight=Preflight(lambda flags: estimate),
        loads=LoadService(runner or FakeRunner(), bus.emit),
        release=release,  # type: ignore[arg-type]
    )
    return session, events, store


async def test_autostart_launches_the_initial_flags_on_the_sessions_port() -> None:
    launcher = FakeLauncher()
    session, _, store = build(launcher=launcher, autostart=True)
    await session.start()
    assert launcher.flags == [FLAGS.replace(port=8123)]
    assert session.current is not None and session.current.flags == FLAGS  # as the form had it
    assert store.records[1].status is RunStatus.STARTING
    await session.close()


async def test_a_restart_stops_first_waits_for_the_gpu_then_stores_then_launches() -> None:
    launcher, order = FakeLauncher(), []

    async def release(pids: set[int]) -> str | None:
        order.append(("release", sorted(pids), launcher.last.state))
        return "GPU memory still held after 30 s; starting anyway"

    estimate = KvEstimate(
        kv_bytes=2240 * 4096,
        num_blocks=140,
        kv_tokens=2240,
        max_concurrency=5.6,
        fits=True,
        largest_fitting_max_model_len=2240,
    )
    session, events, store = build(launcher=launcher, release=release, estimate=estimate)
    await session.start()
    first = await session.restart(FLAGS)
    launcher.last.ready()
    second = await session.restart(FLAGS.replace(max_model_len=400))
    assert order == [("release", [1000, 1500], ServerState.STOPPED)]
    assert any(getattr(e, "text", "").startswith("[vtc] GPU memory still held") for e in events)
    assert [r.status for r in session.runs] == [RunStatus.REPLACED, RunStatus.STARTING]
    assert second.startup.kv_estimate_tokens == 2240 and second.id == 2
    assert first.label == "#1" and second.label == "#2"
    await session.close()
    assert store.records[2].status is RunStatus.STOPPED  # q stops what it started


async def test_a_load_runner_that_raises_is_one_line_and_the_session_carries_on() -> None:
    launcher = FakeLauncher()
    runner = FakeRunner(error=ZeroDivisionError("float division by zero"))
    session, events, _ = build(launcher=launcher, runner=runner)
    await session.start()
    await session.restart(FLAGS)
    launcher.last.ready()
    runner.release.set()
    assert await session.run_load(LoadSpec()) is None
    (finished,) = [e for e in events if isinstance(e, LoadFinished)]
    assert finished.error == "ZeroDivisionError: float division by zero"
    assert session.current is not None and session.current.bench is None
    assert session.current.status is RunStatus.READY  # the server carries on
    await session.close()


async def test_a_cancelled_load_keeps_partial_numbers_only_where_none_were() -> None:
    launcher, runner = FakeLauncher(), FakeRunner(BenchResult(completed=64))
    session, events, _ = build(launcher=launcher, runner=runner)
    await session.start()
    await session.restart(FLAGS)
    launcher.last.ready()
    runner.release.set()
    full = await session.run_load(LoadSpec(num_prompts=64))
    runner.release.clear()
    runner.started.clear()
    partial_task = asyncio.ensure_future(session.run_load(LoadSpec(num_prompts=8)))
    await runner.started.wait()
    assert await session.run_load(LoadSpec()) is None  # one at a time: refused, in one line
    refused = "a load run is already in progress (c cancels it)"
    assert events[-1] == LoadFinished(None, error=refused)
    await session.cancel_load()
    partial = await partial_task
    assert partial is not None and partial.cancelled
    assert session.current is not None and session.current.bench == full
    await session.close()


async def test_load_is_refused_unless_the_server_is_ready() -> None:
    launcher = FakeLauncher()
    session, _, _ = build(launcher=launcher)
    await session.start()
    await session.restart(FLAGS)
    with pytest.raises(VtcError, match="starting, not ready"):
        await session.run_load(LoadSpec())
    await session.close()


async def test_a_failed_start_is_a_failed_card_with_its_diagnosis() -> None:
    launcher = FakeLauncher()
    session, _, store = build(launcher=launcher)
    await session.start()
    await session.restart(FLAGS.replace(max_model_len=30576))
    launcher.last.fail(Diagnosis(kind="kv_cache_too_small", summary="needs more KV"))
    await session.close()
    run = store.records[1]
    assert run.status is RunStatus.FAILED and run.diagnosis is not None
    assert "stop" not in launcher.last.calls  # nothing left to stop


async def test_a_detach_the_server_refuses_stops_it_as_close_would() -> None:
    launcher = FakeLauncher()
    session, _, _ = build(launcher=launcher)
    await session.start()
    await session.restart(FLAGS)
    launcher.last.ready()
    launcher.last.detachable = False
    assert await session.detach() is False and not session.detached
    assert "stop" in launcher.last.calls


async def test_an_adopted_server_continues_its_stored_run_and_others_are_lost() -> None:
    history = [
        RunRecord(id=1, label="#1", flags=FLAGS, status=RunStatus.READY),
        RunRecord(id=2, label="#2", flags=FLAGS, status=RunStatus.READY),
    ]
    adopted = FakeExisting(flags=FLAGS, run_id=2, label="adopted")
    session, _, store = build(
        launcher=FakeLauncher(), existing=adopted, store=MemoryRunStore(history)
    )
    await session.start()
    assert session.current is not None and session.current.id == 2
    assert adopted.calls == ["connect", "watch"]
    await session.close()  # q stops what it adopted, too
    assert store.records[1].status is RunStatus.LOST  # its console died without seeing it end
    assert store.records[2].status is RunStatus.STOPPED and "stop" in adopted.calls


async def test_attached_sessions_refuse_to_restart_and_leave_the_server_running() -> None:
    attached = FakeExisting(flags=FLAGS, run_id=None, label="attached", pid=None)
    session, _, store = build(existing=attached)
    await session.start()
    assert not session.can_restart and session.current is not None
    with pytest.raises(VtcError, match="restart disabled"):
        await session.restart(FLAGS)
    await session.close()
    assert "stop" not in attached.calls and store.records[1].label == "attached"


async def test_a_crash_kills_the_server_and_the_history_says_why() -> None:
    launcher = FakeLauncher(pid_base=2**22 + 12345)  # no such process: killpg is a no-op
    session, _, store = build(launcher=launcher)
    await session.start()
    await session.restart(FLAGS)
    launcher.last.ready()
    await session._book.flush()
    session.abandon("the console crashed (KeyError: 'x'); vtc killed its server")
    assert store.records[1].status is RunStatus.STOPPED
    assert "crashed" in store.records[1].ended_because
