"""Detach and reattach through the console's own composition (``build_session``, as ``vtc
--demo``) with the simulator: a hang-up leaves the server running, the next console adopts
it, ``vtc stop --demo`` takes it down. Every test kills what it may have left, whatever
happens."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from fakes.waiting import until

from tui.app.cli import cmd_stop, main
from tui.domain.events import Launched, Ready, ServerState
from tui.domain.results import RunStatus
from tui.domain.workload import LoadSpec
from tui.modes import ConsoleOptions, build_session
from tui.server.process import ProcessInfo, snapshot_tree
from tui.session import Session, SessionEvent, wait_for_state
from tui.store.server_state import ServerStateFile, ServerStateRecord

LOAD = LoadSpec(input_len=32, output_len=8, num_prompts=4, max_concurrency=2)


@pytest.fixture
def cleanup() -> Iterator[list[ProcessInfo]]:
    """Processes a test started (servers, relays): SIGKILLed afterwards if still alive."""
    procs: list[ProcessInfo] = []
    yield procs
    for info in procs:
        proc = info.process()
        if proc is not None:
            with contextlib.suppress(psutil.Error):
                proc.kill()


def options(tmp_path: Path, **changes: object) -> ConsoleOptions:
    opts = ConsoleOptions(demo=True, sim_speed=50, data_dir=tmp_path, poll_interval_s=0.2)
    for key, value in changes.items():
        setattr(opts, key, value)
    return opts


def state_file(tmp_path: Path) -> ServerStateFile:
    return ServerStateFile.in_data_dir(tmp_path, demo=True)


def relays(log_path: str) -> list[ProcessInfo]:
    """The log relay processes writing ``log_path``."""
    found = []
    for proc in psutil.process_iter(["cmdline", "create_time"]):
        cmd = proc.info["cmdline"] or []
        if "tui.server.relay" in cmd and log_path in cmd:
            found.append(ProcessInfo(proc.pid, proc.info["create_time"]))
    return found


async def started_server(session: Session, cleanup: list[ProcessInfo]) -> int:
    """Start ``session`` (the demo autostarts) and wait for its server to be ready."""
    await session.start()
    assert session.pid is not None
    cleanup.extend(snapshot_tree(session.pid))
    state = await wait_for_state(session, {ServerState.READY, ServerState.FAILED}, 60)
    assert state is ServerState.READY
    return session.pid


async def test_hang_up_then_reattach_then_vtc_stop(
    tmp_path: Path,
    cleanup: list[ProcessInfo],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    file = state_file(tmp_path)
    first = build_session(options(tmp_path))
    pid = await started_server(first, cleanup)
    assert first.current is not None
    run_id = first.current.id
    recorded = file.read()
    assert recorded is not None and recorded.pid == recorded.pgid == pid
    assert recorded.run_id == run_id and recorded.mode == "demo"
    assert recorded.console_pid == os.getpid()
    assert recorded.base_url == first.base_url and recorded.log_path

    # The terminal hangs up: the console detaches, the server and its state file stay.
    assert await first.detach() is True
    assert first.detached
    first.abandon()  # the crash backstop in cli.main runs after every exit: a no-op now
    released = file.read()
    assert released is not None and released.pid == pid and released.console_pid is None
    [relay] = relays(recorded.log_path)  # the relay, started with the server, runs on
    cleanup.append(relay)
    # Nothing the console dropped signals the server (asyncio's subprocess transport would
    # SIGKILL its child when closed or collected; subprocess.Popen never does).
    del first
    gc.collect()
    assert ProcessInfo(pid, recorded.create_time).is_alive() and relay.is_alive()

    # The next console adopts it: same pid, its run current again, READY, loads.
    second = build_session(options(tmp_path))
    assert any(f"pid {pid}" in n and "Reattached" in n for n in second.info.notices)
    events: list[SessionEvent] = []
    second.subscribe(events.append)
    await second.start()
    try:
        assert await wait_for_state(second, {ServerState.READY}, 30) is ServerState.READY
        assert second.pid == pid
        assert second.current is not None and second.current.id == run_id
        assert second.current.status is RunStatus.READY
        assert len(second.runs) == 1  # no new card: the same run goes on
        await until(lambda: any(isinstance(e, Ready) for e in events), "the Ready event")
        launched = [e for e in events if isinstance(e, Launched)]
        assert [e.pid for e in launched] == [pid]  # the panel shows the pid
        ready = [e for e in events if isinstance(e, Ready)]
        assert len(ready) == 1  # how its start went, from its run: not "ready after 0 s"
        assert ready[0].elapsed == second.current.startup.seconds_to_ready
        assert second.current.startup.kv_cache_tokens is not None
        assert ready[0].kv_cache_tokens == second.current.startup.kv_cache_tokens
        result = await second.run_load(LOAD)
        assert result is not None and result.completed == 4
        assert second.current.bench == result
        # The relay kept the log file growing; the adopted server tails it.
        await until(
            lambda: any("POST /v1/completions" in line for line in second.log_lines),
            "the load's access lines in the tailed log",
        )
        again = file.read()
        assert again is not None and again.console_pid == os.getpid()  # watched by us now

        # A second hang-up leaves it running again.
        assert await second.detach() is True
    finally:
        if not second.detached:
            await second.close()

    # `vtc stop --demo`
    monkeypatch.setenv("VTC_DATA_DIR", str(tmp_path))
    tree = snapshot_tree(pid)
    assert len(tree) >= 1
    assert cmd_stop(demo=True, grace_s=10) == 0
    out = capsys.readouterr().out
    assert f"pid {pid}" in out and "SIGTERM" in out and str(recorded.base_url) in out
    assert not [p for p in tree if p.is_alive()]
    assert not file.exists()
    await until(lambda: not relays(recorded.log_path), "the log relay to end at EOF", 10)
    assert main(["stop", "--demo"]) == 1
    assert "no server started by vtc is running" in capsys.readouterr().err


async def test_r_on_an_adopted_server_stops_it_and_launches_a_supervised_one(
    tmp_path: Path, cleanup: list[ProcessInfo]
) -> None:
    file = state_file(tmp_path)
    first = build_session(options(tmp_path))
    old_pid = await started_server(first, cleanup)
    old = file.read()
    assert old is not None
    assert await first.detach() is True
    cleanup.extend(relays(str(old.log_path)))

    second = build_session(options(tmp_path))
    try:
        await second.start()
        assert await wait_for_state(second, {ServerState.READY}, 30) is ServerState.READY
        assert second.current is not None
        flags = second.current.flags
        await second.restart(flags.replace(max_num_seqs=64))
        assert second.pid is not None and second.pid != old_pid
        cleanup.extend(snapshot_tree(second.pid))
        assert not ProcessInfo(old_pid, old.create_time).is_alive()
        state = await wait_for_state(second, {ServerState.READY, ServerState.FAILED}, 60)
        assert state is ServerState.READY
        new = file.read()
        assert new is not None and new.pid == second.pid  # the file follows the new server
        assert [r.status for r in second.runs] == [RunStatus.REPLACED, RunStatus.READY]
        new_pid = second.pid
    finally:
        await second.close()  # q: stops what it runs, and the state file goes with it
    assert not file.exists()
    assert not psutil.pid_exists(new_pid) or psutil.Process(new_pid).status() == "zombie"


async def test_a_stale_state_file_is_removed_with_a_notice_never_acted_on(
    tmp_path: Path, cleanup: list[ProcessInfo]
) -> None:
    file = state_file(tmp_path)
    me = psutil.Process()
    # Our own pid, recorded with another start time: a reused pid. Acting on it would be us.
    file.write(
        ServerStateRecord(
            pid=me.pid,
            pgid=me.pid,
            create_time=me.create_time() - 3600,
            base_url="http://127.0.0.1:9",
            argv=me.cmdline(),
            mode="demo",
        )
    )
    session = build_session(options(tmp_path, autostart=False))
    assert any("stale" in n and "another process" in n for n in session.info.notices)
    assert not file.exists()
    await session.start()
    try:
        assert session.state is ServerState.IDLE and session.current is None  # nothing adopted
    finally:
        await session.close()


async def test_quitting_removes_the_state_file_and_a_launch_that_fails_writes_none(
    tmp_path: Path, cleanup: list[ProcessInfo]
) -> None:
    file = state_file(tmp_path)
    session = build_session(options(tmp_path))
    try:
        pid = await started_server(session, cleanup)
        recorded = file.read()
        assert recorded is not None and recorded.pid == pid
        assert session.current is not None
        await session.restart(session.current.flags.replace(max_model_len=30576))
        assert session.pid is not None
        cleanup.extend(snapshot_tree(session.pid))
        state = await wait_for_state(session, {ServerState.READY, ServerState.FAILED}, 60)
        assert state is ServerState.FAILED  # KV capacity: it exits before ready
        assert not file.exists()
        # Nothing to leave running: a hang-up now is a plain close.
        assert await session.detach() is False
    finally:
        await session.close()
    assert not file.exists()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)  # (already gone: the restart stopped it)
