"""The board's session commands: repeat a run like for like, export it, save a preset, read a log.

Repeats are driven through the real ``Session`` over fake servers and a fake load runner: the
test plays each launched server's life (ready or failed) and checks what the repeat made.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from fakes.runner import FakeRunner
from fakes.runs import MemoryRunStore, served_run
from fakes.servers import FakeLauncher
from fakes.sources import FakeGpu, FakeMetrics

from tui.domain.diagnosis import Diagnosis
from tui.domain.errors import VtcError
from tui.domain.events import Launched
from tui.domain.flags.serve import ServeFlags
from tui.domain.presets import Preset, parse_preset
from tui.domain.results import BenchResult, Reproduction, RunRecord, RunStatus
from tui.domain.workload import LoadSpec
from tui.session import Session, SessionInfo
from tui.session.bus import EventBus
from tui.session.hub import TelemetryHub
from tui.session.loads import LoadService
from tui.session.preflight import Preflight
from tui.session.runbook import RunBook
from tui.session.slot import ServerSlot
from tui.store.console_files import ConsoleFiles, read_tail

WORKLOAD = LoadSpec(num_prompts=8, max_concurrency=2)


def session_over(
    tmp_path: Path, launcher: FakeLauncher, runner: FakeRunner, *, can_launch: bool = True
) -> Session:
    bus, store = EventBus(), MemoryRunStore()
    hub = TelemetryHub(emit=bus.emit, interval_s=0.01, gpu=FakeGpu(), metrics=FakeMetrics())
    return Session(
        SessionInfo(label="test", initial_flags=ServeFlags(model="m"), port=8123),
        bus=bus,
        book=RunBook(store, [], bus.emit),
        slot=ServerSlot(launcher=launcher if can_launch else None),
        hub=hub,
        preflight=Preflight(lambda flags: None),
        loads=LoadService(runner, bus.emit),
        files=ConsoleFiles(tmp_path / "data", presets_dir=tmp_path / "presets"),
    )


def measured(run_id: int = 7) -> RunRecord:
    return served_run(run_id, workload=WORKLOAD, max_num_seqs=64, enable_prefix_caching=True)


def play(session: Session, launcher: FakeLauncher, outcomes: list[str]) -> None:
    """Each server the session launches becomes ready (or fails), in order: on its Launched."""
    left = list(outcomes)

    def on_event(event: object) -> None:
        if isinstance(event, Launched) and left:
            backend, outcome = launcher.last, left.pop(0)
            if outcome == "ready":
                asyncio.get_running_loop().call_soon(backend.ready)
            else:
                failure = Diagnosis(kind="kv_cache_too_small", summary="no KV room")
                asyncio.get_running_loop().call_soon(backend.fail, failure)

    session.subscribe(on_event)


async def test_repeat_restarts_with_the_runs_flags_waits_ready_and_runs_its_workload(
    tmp_path: Path,
) -> None:
    launcher, runner = FakeLauncher(), FakeRunner(BenchResult(completed=8))
    runner.release.set()  # every load returns at once
    session = session_over(tmp_path, launcher, runner)
    run = measured()
    play(session, launcher, ["ready", "ready", "ready"])
    made = await asyncio.wait_for(session.tools.repeat(run, 3), 30)
    assert len(made) == 3 and all(r.status is RunStatus.READY for r in made)
    assert launcher.flags == [run.flags.replace(port=8123)] * 3
    assert [spec for spec, _, _ in runner.calls] == [WORKLOAD] * 3
    book = session.runs
    assert [r.workload for r in book] == [WORKLOAD] * 3
    assert all(r.bench is not None and r.bench.completed == 8 for r in book)
    await session.close()


async def test_a_repeat_that_does_not_serve_stops_the_series_and_says_why(tmp_path: Path) -> None:
    launcher, runner = FakeLauncher(), FakeRunner(BenchResult(completed=8))
    runner.release.set()
    session = session_over(tmp_path, launcher, runner)
    play(session, launcher, ["ready", "failed"])
    with pytest.raises(VtcError, match=r"repeat 2/3 of #7: #2 failed \(no KV room\)"):
        await asyncio.wait_for(session.tools.repeat(measured(), 3), 30)
    assert len(launcher.launched) == 2 and len(runner.calls) == 1
    await session.close()


@pytest.mark.parametrize(
    ("run", "times", "can_launch", "message"),
    [
        (served_run(3, workload=None).model_copy(update={"bench": None}), 2, True, "ran no load"),
        (measured(), 0, True, "1 to 20 times"),
        (measured(), 21, True, "1 to 20 times"),
        (measured(), 2, False, "did not start"),
    ],
    ids=["no-load", "zero", "too-many", "attached"],
)
async def test_repeats_that_cannot_be_like_for_like_are_refused(
    tmp_path: Path, run: RunRecord, times: int, can_launch: bool, message: str
) -> None:
    launcher = FakeLauncher()
    session = session_over(tmp_path, launcher, FakeRunner(), can_launch=can_launch)
    with pytest.raises(VtcError, match=message):
        await session.tools.repeat(run, times)
    assert launcher.launched == []
    await session.close()


async def test_export_writes_the_format_under_the_data_dir_with_secrets_by_name(
    tmp_path: Path,
) -> None:
    session = session_over(tmp_path, FakeLauncher(), FakeRunner())
    # A secret never reaches the flags (ServeFlags refuses it); the run records its name, and
    # even a value slipped into the recorded environment must not reach an export.
    repro = Reproduction(env={"VLLM_API_KEY": "sk-very-secret"}, secret_env=["HF_TOKEN"])
    run = measured().model_copy(
        update={"flags": ServeFlags(model="m", max_num_seqs=64), "repro": repro}
    )
    path = await session.tools.export(run, "compose")
    assert path == tmp_path / "data" / "exports" / "runs" / "7" / "compose.yaml"
    text = path.read_text()
    assert "sk-very-secret" not in text
    assert "${VLLM_API_KEY}" in text and "${HF_TOKEN}" in text
    assert yaml.safe_load(text)["services"]
    command = await session.tools.export(run, "command")
    assert command.stat().st_mode & 0o100  # a script the operator can run
    with pytest.raises(ValueError, match="unknown export format"):
        await session.tools.export(run, "docx")
    await session.close()


async def test_save_preset_writes_a_user_preset_that_reads_back(tmp_path: Path) -> None:
    session = session_over(tmp_path, FakeLauncher(), FakeRunner())
    preset = Preset(
        name="mine-64",
        description="d",
        source="vtc console",
        flags=ServeFlags(model="m", max_num_seqs=64),
        workload=WORKLOAD,
        sim_gpu="rtx3080-10gb",
    )
    path = await session.tools.save_preset(preset)
    assert path == tmp_path / "presets" / "mine-64.toml"
    assert parse_preset(path.read_text()) == preset
    await session.close()


async def test_log_tail_reads_the_runs_own_log_file_bounded(tmp_path: Path) -> None:
    session = session_over(tmp_path, FakeLauncher(), FakeRunner())
    log = tmp_path / "run.log"
    log.write_text("".join(f"line {i}\n" for i in range(1000)))
    tail = await session.tools.log_tail(measured().model_copy(update={"log_path": str(log)}))
    assert tail.lines[-1] == "line 999" and len(tail.lines) == 400
    assert "the last 400 lines" in tail.note
    none = await session.tools.log_tail(measured())
    assert none.lines == () and "no log file recorded" in none.note
    gone = await session.tools.log_tail(measured().model_copy(update={"log_path": str(log) + "x"}))
    assert "gone" in gone.note
    await session.close()


def test_a_tail_cut_by_bytes_starts_at_a_whole_line(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    log.write_bytes(b"".join(b"%05d " % i + b"x" * 94 + b"\n" for i in range(100)) + b"\xff\n")
    tail = read_tail(log, lines=1000, max_bytes=1050)
    assert all(len(line) == 100 for line in tail.lines[:-1])  # no half line first
    assert tail.lines[-1] == "\ufffd"  # undecodable bytes replaced, not an error
