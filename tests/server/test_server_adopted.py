"""Reattach pieces against real (tiny, sleeping) processes: is the recorded server still the
same process, the state-file keeper, watching and stopping an adopted server, ``vtc stop``."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from fakes.net import gone
from fakes.prober import FakeProber
from fakes.waiting import until

from tui.domain.events import Exited, Failed, Launched, LogLine, Ready, ServerEvent, ServerState
from tui.domain.flags.serve import ServeFlags
from tui.server.adopted import (
    AdoptedServer,
    ServerStateKeeper,
    argv_matches,
    check_record,
    inspect_state_file,
    stop_recorded_server,
)
from tui.server.backend import ADOPTED, Takeover
from tui.server.process import ProcessInfo
from tui.store.server_state import ServerStateFile, ServerStateRecord

# A "server": its own session (as the supervisor launches one) with one child, both sleeping.
# With "stubborn" both ignore SIGTERM, so only SIGKILL ends them.
# With "loud=PATH" the child, when SIGTERM reaches it, appends an EngineCore's fatal-error
# lines to PATH (what a real orphan may log when the console's teardown signals it).
SERVER = r"""
import signal, subprocess, sys, time
stubborn = "stubborn" in sys.argv
loud = next((a[5:] for a in sys.argv if a.startswith("loud=")), "")
if stubborn:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
code = ("import os, signal, sys, time\n"
        + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if stubborn else "")
        + ("def die(*_):\n"
           "    with open(sys.argv[1], 'a') as f:\n"
           "        f.write('ERROR [core.py:1] EngineCore encountered a fatal error.\\n')\n"
           "        f.write('ERROR [core.py:1] Traceback (most recent call last):\\n')\n"
           "        f.write('ERROR [core.py:1] RuntimeError: cancelled\\n')\n"
           "    os._exit(1)\n"
           "signal.signal(signal.SIGTERM, die)\n" if loud else "")
        + "print(os.getpid(), flush=True)\n"
        + "while True: time.sleep(1)")
child = subprocess.Popen([sys.executable, "-c", code, loud], stdout=subprocess.PIPE, text=True)
print(child.stdout.readline().strip(), flush=True)  # once its signal handling is in place
while True:
    time.sleep(1)
"""


class Spawned:
    """One fake server: the Popen, its argv, the child's pid."""

    def __init__(self, stubborn: bool = False, loud: Path | None = None) -> None:
        self.argv = [sys.executable, "-c", SERVER, *(["stubborn"] if stubborn else [])]
        if loud is not None:
            self.argv.append(f"loud={loud}")
        self.proc = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, text=True, start_new_session=True
        )
        assert self.proc.stdout is not None
        self.child_pid = int(self.proc.stdout.readline())
        self.create_time = psutil.Process(self.proc.pid).create_time()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def record(self, tmp_path: Path, **changes: object) -> ServerStateRecord:
        base = ServerStateRecord(
            pid=self.pid,
            pgid=self.pid,
            create_time=self.create_time,
            base_url="http://127.0.0.1:1",
            argv=self.argv,
            flags={"model": "m", "max_model_len": 512},
            log_path=str(tmp_path / "serve.log"),
            run_id=3,
            mode="demo",
        )
        return base.model_copy(update=changes)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.child_pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


@pytest.fixture
def spawn() -> Iterator[list[Spawned]]:
    """Fake servers started by a test; afterwards each tree is killed and reaped."""
    started: list[Spawned] = []
    yield started
    for s in started:
        s.kill()


def start(spawn: list[Spawned], stubborn: bool = False, loud: Path | None = None) -> Spawned:
    s = Spawned(stubborn, loud)
    spawn.append(s)
    return s


# -- is it still the same process? ------------------------------------------------------------
def test_argv_matches_exactly_or_behind_an_interpreter() -> None:
    argv = ["/venv/bin/vllm", "serve", "m", "--port", "8000"]
    assert argv_matches(argv, argv)
    assert argv_matches(["/venv/bin/python3", *argv], argv)  # the #! line ran it
    assert not argv_matches(["/venv/bin/python3", "/venv/bin/vllm", "serve", "other"], argv)
    assert not argv_matches(argv[:-1], argv)
    assert not argv_matches(argv, [])


def test_a_running_server_is_recognised(spawn: list[Spawned], tmp_path: Path) -> None:
    s = start(spawn)
    check = check_record(s.record(tmp_path))
    assert check.running and check.reason == "" and check.console_pid is None


def test_a_dead_pid_is_stale(spawn: list[Spawned], tmp_path: Path) -> None:
    s = start(spawn)
    record = s.record(tmp_path)
    s.kill()
    check = check_record(record)
    assert not check.running
    assert str(s.pid) in check.reason


def test_a_reused_pid_is_stale_by_its_creation_time(spawn: list[Spawned], tmp_path: Path) -> None:
    s = start(spawn)
    # The same pid, but a process created at another time: the kernel reused the number.
    check = check_record(s.record(tmp_path, create_time=s.create_time - 3600))
    assert not check.running
    assert "another process" in check.reason


def test_a_pid_running_another_command_is_stale(spawn: list[Spawned], tmp_path: Path) -> None:
    s = start(spawn)
    check = check_record(s.record(tmp_path, argv=["/venv/bin/vllm", "serve", "m"]))
    assert not check.running
    assert "something else" in check.reason


def test_a_live_console_still_watching_it_is_reported(spawn: list[Spawned], tmp_path: Path) -> None:
    s = start(spawn)
    me = psutil.Process()
    watched = s.record(tmp_path, console_pid=me.pid, console_create_time=me.create_time())
    assert check_record(watched).console_pid == me.pid
    # A console pid whose start time does not match is a dead console's reused pid.
    stale_console = watched.model_copy(update={"console_create_time": me.create_time() - 60})
    assert check_record(stale_console).console_pid is None


def test_inspect_adopts_a_free_server_and_removes_stale_files(
    spawn: list[Spawned], tmp_path: Path
) -> None:
    s = start(spawn)
    file = ServerStateFile(tmp_path / "server.json")
    assert inspect_state_file(file).record is None and inspect_state_file(file).notice is None

    recorded = s.record(tmp_path)
    file.write(recorded)
    found = inspect_state_file(file)
    assert found.record == recorded
    assert found.notice is not None and str(s.pid) in found.notice
    assert file.exists()

    me = psutil.Process()
    file.write(s.record(tmp_path, console_pid=me.pid, console_create_time=me.create_time()))
    busy = inspect_state_file(file)
    assert busy.record is None and busy.notice is not None and "another vtc" in busy.notice
    assert file.exists()  # another console's: left alone

    file.write(s.record(tmp_path, create_time=s.create_time - 3600))
    stale = inspect_state_file(file)
    assert stale.record is None and stale.notice is not None and "stale" in stale.notice
    assert not file.exists()
    assert s.proc.poll() is None  # a stale record is never acted on

    file.path.write_text("{not json")
    broken = inspect_state_file(file)
    assert broken.record is None and broken.notice is not None and "unreadable" in broken.notice
    assert not file.exists()


# -- the keeper -----------------------------------------------------------------------------
def test_the_keeper_records_releases_and_forgets(spawn: list[Spawned], tmp_path: Path) -> None:
    a, b = start(spawn), start(spawn)
    file = ServerStateFile(tmp_path / "demo-server.json")
    keeper = ServerStateKeeper(file, mode="demo")
    flags = ServeFlags(model="m", port=8123)
    common = {"base_url": "http://127.0.0.1:8123", "flags": flags, "log_path": None}
    assert keeper.record(pid=a.pid, argv=a.argv, run_id=1, **common)  # type: ignore[arg-type]
    saved = file.read()
    assert saved is not None
    assert (saved.pid, saved.pgid, saved.run_id, saved.mode) == (a.pid, a.pid, 1, "demo")
    assert saved.create_time == pytest.approx(a.create_time, abs=0.01)
    assert saved.console_pid == os.getpid()
    assert ServeFlags.model_validate(saved.flags) == flags
    assert keeper.holds(a.pid) and not keeper.holds(b.pid)

    # Another keeper (another console) must not overwrite the record of a running server.
    other = ServerStateKeeper(file, mode="demo")
    assert not other.record(pid=b.pid, argv=b.argv, run_id=2, **common)  # type: ignore[arg-type]
    assert file.read() == saved
    other.forget(b.pid)
    assert file.exists()

    assert keeper.release(a.pid)  # a detach: the file stays, naming no console
    released = file.read()
    assert released is not None and released.pid == a.pid and released.console_pid is None
    assert not keeper.holds(a.pid)

    assert keeper.record(pid=a.pid, argv=a.argv, run_id=1, **common)  # adopted again
    readopted = file.read()
    assert readopted is not None and readopted.started_at == saved.started_at
    keeper.forget(a.pid)  # it stopped
    assert not file.exists()


# -- an adopted server ------------------------------------------------------------------------
async def test_an_adopted_server_is_announced_followed_and_stopped_whole(
    spawn: list[Spawned], tmp_path: Path
) -> None:
    s = start(spawn)
    log = tmp_path / "serve.log"
    log.write_text("# vtc: vllm serve m\nline one\nline two\n")
    events: list[ServerEvent] = []
    server = AdoptedServer(
        s.record(tmp_path), prober=FakeProber(200, ["m"]), grace_s=2, poll_interval_s=0.05
    )
    assert server.capabilities == ADOPTED
    takeover = await server.connect(events.append)
    assert takeover == Takeover(ServeFlags(model="m", max_model_len=512), run_id=3, label="adopted")
    assert server.state is ServerState.READY and list(server.log_lines) == ["line one", "line two"]
    assert events == []  # connect only looks
    server.watch()
    await until(lambda: any(isinstance(e, Ready) for e in events), "Ready")
    assert next(e for e in events if isinstance(e, Ready)).timed is False
    assert isinstance(events[0], Launched) and events[0].pid == s.pid
    assert [e.text for e in events if isinstance(e, LogLine)] == ["line one", "line two"]

    with log.open("a") as f:  # the relay keeps appending the server's output
        f.write("line three\nhalf a li")
    await until(lambda: "line three" in server.log_lines, "the appended line")
    assert "half a li" not in server.log_lines  # only complete lines
    with log.open("a") as f:
        f.write("ne\n")
    await until(lambda: "half a line" in server.log_lines, "the completed line")

    await server.stop()
    assert server.state is ServerState.STOPPED
    assert events[-1] == Exited(exit_code=None, requested=True)
    assert server.last_termination is not None and server.last_termination.clean
    assert gone(s.pid) and gone(s.child_pid)  # the tree, not just the root
    await server.stop()  # again: nothing more happens
    assert [type(e) for e in events].count(Exited) == 1
    await server.aclose()


async def test_an_adopted_server_that_dies_leaves_no_orphan(
    spawn: list[Spawned], tmp_path: Path
) -> None:
    s = start(spawn)
    events: list[ServerEvent] = []
    server = AdoptedServer(
        s.record(tmp_path, log_path=None),
        prober=FakeProber(None),
        grace_s=2,
        poll_interval_s=0.05,
    )
    await server.connect(events.append)
    assert server.state is ServerState.STARTING  # alive, /health not answering yet
    server.watch()
    await until(lambda: s.child_pid in server.pids(), "a snapshot of its tree")
    os.kill(s.pid, signal.SIGKILL)  # the API server alone dies, as under the OOM killer
    await until(lambda: any(isinstance(e, Exited) for e in events), "Exited")
    assert events[-1] == Exited(exit_code=None, requested=False)
    assert server.state is ServerState.STOPPED
    await until(lambda: gone(s.child_pid), "the orphan to be killed")
    await server.aclose()


async def test_it_can_be_stopped_or_detached_and_a_detach_leaves_it_running(
    spawn: list[Spawned], tmp_path: Path
) -> None:
    s = start(spawn)
    events: list[ServerEvent] = []
    server = AdoptedServer(s.record(tmp_path), prober=FakeProber(200), poll_interval_s=0.05)
    assert server.capabilities.can_stop and server.capabilities.can_detach
    assert server.capabilities.local
    await server.connect(events.append)
    server.watch()
    await until(lambda: any(isinstance(e, Ready) for e in events), "Ready")
    assert await server.detach() is True  # a hang-up: the watching ends, the server runs on
    await server.aclose()
    assert s.proc.poll() is None and not gone(s.child_pid)
    count = len(events)
    await server.stop()  # released first: the first request wins, nothing is signalled
    assert s.proc.poll() is None and len(events) == count


async def test_a_stop_before_any_watching_stops_it_whole(
    spawn: list[Spawned], tmp_path: Path
) -> None:
    s = start(spawn)
    events: list[ServerEvent] = []
    server = AdoptedServer(s.record(tmp_path), prober=FakeProber(200), grace_s=2)
    await server.connect(events.append)
    await server.stop()  # r pressed before it was announced
    assert [type(e) for e in events] == [Exited]
    assert gone(s.pid) and gone(s.child_pid)


async def test_the_cause_of_its_death_is_read_from_the_log_as_it_was(
    spawn: list[Spawned], tmp_path: Path
) -> None:
    """Lines appended after its death was noticed (its orphans' reaction to the console's
    teardown) are not read for the cause."""
    log = tmp_path / "serve.log"
    log.write_text("# vtc: vllm serve m\nINFO serving\n")
    s = start(spawn, loud=log)
    events: list[ServerEvent] = []
    server = AdoptedServer(
        s.record(tmp_path), prober=FakeProber(200), grace_s=2, poll_interval_s=0.05
    )
    await server.connect(events.append)
    server.watch()
    await until(lambda: any(isinstance(e, Ready) for e in events), "Ready")
    await until(lambda: s.child_pid in server.pids(), "a snapshot of its tree")
    os.kill(s.pid, signal.SIGKILL)  # the API server alone; its orphan dies loudly later
    await until(lambda: any(isinstance(e, Exited) for e in events), "Exited")
    assert not [e for e in events if isinstance(e, Failed)]  # no cause was invented
    assert server.state is ServerState.STOPPED
    assert gone(s.child_pid)
    assert "RuntimeError: cancelled" in log.read_text()  # it did write them
    await server.aclose()


# -- vtc stop ---------------------------------------------------------------------------------
@pytest.mark.parametrize("stubborn", [False, True])
def test_stop_takes_the_recorded_tree_down(
    spawn: list[Spawned], tmp_path: Path, stubborn: bool
) -> None:
    s = start(spawn, stubborn=stubborn)
    file = ServerStateFile(tmp_path / "server.json")
    file.write(s.record(tmp_path))
    outcome = stop_recorded_server(file, grace_s=0.5)
    assert outcome.stopped, outcome.message
    assert str(s.pid) in outcome.message and "http://127.0.0.1:1" in outcome.message
    assert ("SIGKILL" in outcome.message) is stubborn
    assert ("SIGTERM" in outcome.message) is not stubborn
    assert not file.exists()
    s.proc.wait(timeout=5)
    assert gone(s.child_pid)
    assert not ProcessInfo(s.child_pid, psutil.Process().create_time()).is_alive()


def test_stop_with_nothing_recorded_or_a_stale_record(spawn: list[Spawned], tmp_path: Path) -> None:
    file = ServerStateFile(tmp_path / "server.json")
    nothing = stop_recorded_server(file)
    assert not nothing.stopped and nothing.message == "no server started by vtc is running"

    s = start(spawn)
    file.write(s.record(tmp_path, create_time=s.create_time - 3600))  # pid reused
    stale = stop_recorded_server(file)
    assert not stale.stopped and "stale" in stale.message
    assert not file.exists()
    assert s.proc.poll() is None  # the process now holding that pid is left alone
