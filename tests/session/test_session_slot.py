"""The server slot from fake backends: launch, stale events, state file, capabilities."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from typing import NamedTuple

import pytest
from fakes.servers import FakeExisting, FakeLauncher

from tui.domain.events import Exited, Launched, LogLine, ServerEvent, ServerState
from tui.domain.flags.serve import ServeFlags
from tui.session.slot import LaunchRefused, LeftRunning, ServerSlot

FLAGS = ServeFlags(model="m", port=8123)


class FakeKeeper:
    """Records what the slot asked of the state file."""

    def __init__(self, *, holds: bool = True) -> None:
        self.recorded: list[dict[str, object]] = []
        self.forgotten: list[int | None] = []
        self.released: list[int] = []
        self._holds = holds

    def holds(self, pid: int) -> bool:
        return self._holds

    def record(
        self,
        *,
        pid: int,
        argv: Sequence[str],
        base_url: str,
        flags: ServeFlags | None,
        log_path: str | None,
        run_id: int | None,
    ) -> bool:
        self.recorded.append({"pid": pid, "url": base_url, "flags": flags, "run_id": run_id})
        return True

    def release(self, pid: int) -> bool:
        self.released.append(pid)
        return True

    def forget(self, pid: int | None) -> None:
        self.forgotten.append(pid)


async def test_a_launch_is_recorded_with_its_url_and_run_and_forgotten_when_it_ends() -> None:
    launcher, keeper = FakeLauncher(), FakeKeeper()
    slot = ServerSlot(launcher=launcher, keeper=keeper, launch_args=["--sim-speed", "4"])
    seen: list[ServerEvent] = []
    slot.listen(seen.append)
    await slot.launch(FLAGS, run_id=7)
    assert isinstance(seen[0], Launched) and slot.state is ServerState.STARTING
    assert launcher.extra == [("--sim-speed", "4")]
    assert keeper.recorded == [
        {"pid": 1000, "url": "http://127.0.0.1:8123", "flags": FLAGS, "run_id": 7}
    ]
    assert slot.live_pids() == {1000, 1500}
    launcher.last.exit(1)
    assert keeper.forgotten == [1000] and slot.live_pids() == set()


class Launching(NamedTuple):
    """A slot whose launch has sent ``Launched`` but not returned (held until ``finish``)."""

    slot: ServerSlot
    launcher: FakeLauncher
    begun: asyncio.Event
    task: asyncio.Task[None]

    async def finish(self) -> None:
        """Let the launch return (it must not fail)."""
        self.begun.set()
        await self.task


async def _launch_in_progress(keeper: FakeKeeper) -> Launching:
    begun = asyncio.Event()
    launcher = FakeLauncher(begun=begun)
    slot = ServerSlot(launcher=launcher, keeper=keeper)
    seen = asyncio.Event()
    slot.listen(lambda event: seen.set() if isinstance(event, Launched) else None)
    launch = asyncio.create_task(slot.launch(FLAGS, run_id=3))
    await seen.wait()
    assert not launch.done()
    return Launching(slot, launcher, begun, launch)


async def test_a_server_is_recorded_when_it_is_launched_before_the_launch_returns() -> None:
    """The leak of issue 36: the demo's server, launched by ``r`` after a start on a busy
    history, was recorded only once launch() returned; the console quit (hung up) before
    that, and left a server no state file named (``vtc stop --demo``: none running)."""
    keeper = FakeKeeper()
    slot = (launching := await _launch_in_progress(keeper)).slot
    assert keeper.recorded == [
        {"pid": 1000, "url": "http://127.0.0.1:8123", "flags": FLAGS, "run_id": 3}
    ]
    assert slot.pid == 1000 and slot.state is ServerState.STARTING
    await launching.finish()


async def test_a_quit_during_a_launch_stops_the_server_being_launched() -> None:
    keeper = FakeKeeper()
    launching = await _launch_in_progress(keeper)
    slot, launcher = launching.slot, launching.launcher
    await slot.stop()  # q: the session closes while the launch is under way
    assert launcher.last.calls == ["stop"] and launcher.last.state is ServerState.STOPPED
    assert keeper.forgotten == [1000]  # it ended: its state file goes
    await launching.finish()


async def test_a_hang_up_during_a_launch_leaves_the_server_recorded_for_the_next_console() -> None:
    keeper = FakeKeeper()
    launching = await _launch_in_progress(keeper)
    slot, launcher = launching.slot, launching.launcher
    assert await slot.detach_or_stop() is True  # SIGHUP: detach, as once launched
    assert keeper.released == [1000] and "stop" not in launcher.last.calls
    assert slot.left_running == LeftRunning(pid=1000, base_url="http://127.0.0.1:8123")
    await launching.finish()


async def test_events_of_a_server_the_slot_moved_on_from_are_dropped() -> None:
    launcher = FakeLauncher()
    slot = ServerSlot(launcher=launcher)
    seen: list[ServerEvent] = []
    slot.listen(seen.append)
    await slot.launch(FLAGS, run_id=1)
    old = launcher.last
    await slot.stop()
    await slot.launch(FLAGS, run_id=2)
    before = len(seen)
    old.line("a late line of the old server")
    old.exit(0)
    assert len(seen) == before  # never lands on the new run
    launcher.last.line("the new server's line")
    assert seen[-1] == LogLine("the new server's line")
    assert old.calls == ["stop", "aclose"]


async def test_a_second_launch_while_one_runs_is_refused() -> None:
    slot = ServerSlot(launcher=FakeLauncher())
    await slot.launch(FLAGS, run_id=1)
    with pytest.raises(Exception, match="stop it first"):
        await slot.launch(FLAGS, run_id=2)


async def test_an_attached_server_is_never_launched_or_stopped() -> None:
    attached = FakeExisting(flags=ServeFlags(model="m"), run_id=None, label="attached", pid=None)
    slot = ServerSlot(existing=attached)
    takeover = await slot.take_over()
    assert takeover is not None and takeover.label == "attached" and not slot.can_launch
    slot.watch(None)
    with pytest.raises(LaunchRefused, match="restart disabled"):
        await slot.launch(FLAGS, run_id=1)
    await slot.stop()  # capabilities say no: nothing is asked of it
    assert "stop" not in attached.calls and slot.state is ServerState.READY
    assert await slot.detach() is False
    assert slot.live_pids() == set()  # remote: its pids mean nothing here


async def test_an_adopted_server_is_claimed_in_the_state_file_as_its_stored_run() -> None:
    keeper = FakeKeeper()
    adopted = FakeExisting(flags=FLAGS, run_id=5, label="adopted", pid=4242)
    slot = ServerSlot(launcher=FakeLauncher(), existing=adopted, keeper=keeper)
    await slot.take_over()
    slot.watch(5)
    assert keeper.recorded == [
        {"pid": 4242, "url": "http://127.0.0.1:8000", "flags": FLAGS, "run_id": 5}
    ]
    assert await slot.detach() is True and keeper.released == [4242]
    # What the console prints on its way out: once the slot closes it no longer holds the
    # server (its pid and URL read None), so the detach keeps them.
    await slot.aclose()
    assert slot.pid is None and slot.base_url is None
    assert slot.left_running == LeftRunning(pid=4242, base_url="http://127.0.0.1:8000")


async def test_detach_refused_by_the_server_leaves_the_state_file_alone() -> None:
    launcher, keeper = FakeLauncher(), FakeKeeper()
    slot = ServerSlot(launcher=launcher, keeper=keeper)
    await slot.launch(FLAGS, run_id=1)
    launcher.last.detachable = False  # e.g. it ended between the check and the detach
    assert await slot.detach() is False
    assert keeper.released == [] and "detach" in launcher.last.calls
    assert await ServerSlot(launcher=launcher).detach() is False  # nothing launched: no


async def test_detach_needs_the_state_file_to_be_ours() -> None:
    launcher = FakeLauncher()
    slot = ServerSlot(launcher=launcher, keeper=FakeKeeper(holds=False))
    await slot.launch(FLAGS, run_id=1)
    assert await slot.detach() is False and "detach" not in launcher.last.calls


async def test_abandon_kills_the_servers_whole_group() -> None:
    group = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess,sys,time; "
            "subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)']); time.sleep(60)",
        ],
        start_new_session=True,
    )
    try:
        launcher = FakeLauncher(pid_base=group.pid)
        slot = ServerSlot(launcher=launcher)
        await slot.launch(FLAGS, run_id=1)
        slot.abandon()
        assert group.wait(timeout=30) == -signal.SIGKILL
    finally:
        if group.poll() is None:
            os.killpg(group.pid, signal.SIGKILL)


async def test_a_port_refused_before_launch_ends_the_run_without_a_process() -> None:
    launcher, keeper = FakeLauncher(port_busy=True), FakeKeeper()
    slot = ServerSlot(launcher=launcher, keeper=keeper)
    seen: list[ServerEvent] = []
    slot.listen(seen.append)
    await slot.launch(FLAGS, run_id=1)
    assert slot.state is ServerState.FAILED and keeper.recorded == []
    assert not any(isinstance(e, Exited) for e in seen)
