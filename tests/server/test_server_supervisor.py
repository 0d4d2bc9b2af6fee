"""Launching and watching end to end against a fake ``vllm`` (tests/server/fake_vllm.py)
that replays real CPU vLLM captures, serves /health, spawns children and exits on cue.

The first half drives the one-server-at-a-time ``Supervisor`` (the shape the integration
suite and the benchmark use); the second the ``ProcessLauncher`` and its ``LaunchedServer``
directly: capabilities, detaching (and refusing to), the default host, and which end
wins when the exit and the console's teardown meet."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from fakes.net import free_port, gone
from fakes.prober import FakeProber
from fakes.supervisor import Supervisor
from fakes.waiting import Recorder, until

from tui.domain.events import (
    Exited,
    Failed,
    KvCacheReported,
    Launched,
    LogLine,
    Ready,
    ServerEvent,
    ServerState,
    Stage,
    StageReached,
)
from tui.domain.flags.serve import ServeFlags
from tui.server.backend import LAUNCHED
from tui.server.launched import LaunchedServer
from tui.server.launcher import DEFAULT_HOST, ProcessLauncher, with_default_host
from tui.server.spawn import ExitWatch

HERE = Path(__file__).resolve().parent
FAKE = HERE / "fake_vllm.py"
CAPTURES = HERE.parent / "captures"
MODEL = "/models/tiny-llama"


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Callable[..., tuple[Supervisor, Recorder]]]:
    made: list[Supervisor] = []

    def factory(
        *fake_args: str,
        http: Any = None,
        env: dict[str, str] | None = None,
        recorder: Recorder | None = None,
        **kw: Any,
    ) -> tuple[Supervisor, Recorder]:
        rec = recorder or Recorder()
        options = {"startup_timeout_s": 60.0, "grace_s": 0.3, "poll_interval_s": 0.05, **kw}
        sup = Supervisor(
            [sys.executable, str(FAKE), *fake_args],
            env,
            tmp_path / "logs",
            rec,
            http,
            **options,
        )
        made.append(sup)
        return sup, rec

    yield factory
    for sup in made:  # never leave a fake server behind, whatever the test did
        await sup.aclose()


def capture(name: str) -> str:
    return str(CAPTURES / name)


def flags(**kw: Any) -> ServeFlags:
    return ServeFlags(model=MODEL, host="127.0.0.1", port=free_port(), **kw)


async def test_api_up_log_line_triggers_probing_before_the_next_poll(make: Any) -> None:
    # A 30 s poll interval: Ready can only come in time if the "Starting vLLM server on" line
    # (API up) sets the probing off, as it does, rather than the interval.
    sup, rec = make(
        "--capture",
        capture("startup_eager_kv64M.log"),
        "--until",
        "Application startup complete",
        "--health-after",
        "0.3",
        poll_interval_s=30.0,
    )
    await sup.start(flags(enforce_eager=True, kv_cache_memory_bytes=64 * 2**20))
    assert await sup.wait_settled(15) is ServerState.READY
    assert Stage.API_UP in {e.stage for e in rec.of(StageReached)}


async def test_ready_then_stop(make: Any) -> None:
    sup, rec = make(
        "--capture",
        capture("startup_eager_kv64M.log"),
        "--until",
        "Application startup complete",
        "--health-after",
        "0.1",
    )
    f = flags(enforce_eager=True, kv_cache_memory_bytes=64 * 2**20)
    await sup.start(f)
    assert await sup.wait_settled(30) is ServerState.READY

    launched = rec.of(Launched)[0]
    assert launched.argv[:3] == (sys.executable, str(FAKE), "--capture")
    serve_at = launched.argv.index("serve")
    assert list(launched.argv[serve_at + 1 :]) == f.to_argv()
    assert launched.pid == sup.pid
    firsts: dict[Stage, StageReached] = {}
    for e in rec.of(StageReached):
        firsts.setdefault(e.stage, e)
    assert list(firsts) == [
        Stage.LAUNCHING,
        Stage.LOADING_WEIGHTS,
        Stage.PROFILING,
        Stage.KV_CACHE,
        Stage.API_UP,
        Stage.READY,
    ]
    assert rec.of(KvCacheReported) == [KvCacheReported("CPU", 131_072, 4096, 32.0)]
    ready = rec.of(Ready)[0]
    assert ready.kv_cache_tokens == 131_072
    assert ready.max_concurrency == 32.0
    assert sup.base_url == f"http://127.0.0.1:{f.port}"
    assert sup.started_at is not None
    assert sup.state is ServerState.READY

    pid = sup.pid
    assert pid is not None
    await sup.stop()
    assert sup.state is ServerState.STOPPED
    assert rec.events[-1] == Exited(exit_code=0, requested=True)
    assert gone(pid)
    log_path = sup.log_path
    assert log_path is not None
    text = log_path.read_text()
    assert text.startswith("# vtc: ")
    assert "CPU KV cache size: 131,072 tokens" in text
    assert sup.log_lines.lines()[-1] == "INFO:     Application startup complete."


async def test_exit_before_ready_fails_at_once_with_the_diagnosis(make: Any) -> None:
    sup, rec = make(
        "--capture",
        capture("fail_a1_maxlen65536_kvbytes16M.log"),
        "--exit",
        "1",
        startup_timeout_s=120.0,
    )
    await sup.start(flags(max_model_len=65536, kv_cache_memory_bytes=16 * 2**20))
    assert await sup.wait_settled(30) is ServerState.FAILED
    failed = rec.of(Failed)
    assert len(failed) == 1
    assert failed[0].exit_code == 1
    assert failed[0].elapsed < 120.0  # decided by the exit, not by the startup timeout
    d = failed[0].diagnosis
    assert d.kind == "kv_cache_too_small"
    assert d.fixes[0].set == {"max_model_len": 32640}
    assert d.fixes[1].set == {"kv_cache_memory_bytes": 33 * 2**20}
    assert rec.of(Ready) == []
    assert rec.kinds() == ["Launched", "Failed"]
    lines = (CAPTURES / "fail_a1_maxlen65536_kvbytes16M.log").read_text().splitlines()
    assert len(rec.of(LogLine)) == len(lines)
    assert sup.exit_code == 1


async def test_port_in_use_is_refused_before_launch(make: Any) -> None:
    # Someone else's server answers /health on the port: it must never count as ours.
    prober = FakeProber(200, [MODEL])
    sup, rec = make("--health-after", "0", http=prober)
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        await sup.start(ServeFlags(model=MODEL, host="127.0.0.1", port=port))
    assert sup.state is ServerState.FAILED
    assert rec.of(Launched) == []
    assert rec.of(Ready) == []
    assert sup.pid is None
    [failed] = rec.of(Failed)
    assert failed.diagnosis.kind == "port_in_use"
    assert failed.diagnosis.facts["port"] == port
    assert failed.diagnosis.fixes[0].set == {"port": port + 1}
    assert prober.calls == 0


async def _until_stage(rec: Recorder, stage: Stage) -> None:
    await rec.wait(lambda: any(e.stage is stage for e in rec.of(StageReached)), stage.value)


async def test_timeout_names_the_stage_it_stuck_in(make: Any) -> None:
    sup, rec = make(
        "--capture",
        capture("startup_eager_kv64M.log"),
        "--until",
        "Starting to load model",
    )
    await sup.start(flags())
    await _until_stage(rec, Stage.LOADING_WEIGHTS)
    sup.startup_timeout_s = max(0.01, sup.elapsed())  # time is up at the next poll
    assert await sup.wait_settled(30) is ServerState.FAILED
    [failed] = rec.of(Failed)
    d = failed.diagnosis
    assert d.kind == "unknown"
    assert d.facts["stage"] == "loading weights"
    assert d.facts["timeout_s"] == sup.startup_timeout_s
    assert "loading weights" in d.summary
    assert "Starting to load model" in d.evidence
    pid = rec.of(Launched)[0].pid
    assert gone(pid)  # a server that timed out is killed


async def test_models_must_list_the_served_model(make: Any) -> None:
    # /health says 200 but /v1/models does not list our model: not ready, however long.
    prober = FakeProber(200, ["some-other-model"])
    sup, rec = make("--capture", capture("startup_eager_kv64M.log"), http=prober)
    await sup.start(flags())
    await until(
        lambda: prober.calls >= 5 and Stage.API_UP in {e.stage for e in rec.of(StageReached)},
        "five probes after API up",
    )
    assert sup.state is ServerState.STARTING
    assert rec.of(Ready) == []
    sup.startup_timeout_s = max(0.01, sup.elapsed())
    assert await sup.wait_settled(30) is ServerState.FAILED
    assert rec.of(Failed)[0].diagnosis.facts["stage"] == "API up"


async def test_injected_prober_and_served_model_name(make: Any) -> None:
    rec = Recorder()

    def health(_calls: int) -> int | None:
        # Up once the replayed log has reached "API up", as a real server would be.
        return 200 if any(e.stage is Stage.API_UP for e in rec.of(StageReached)) else None

    prober = FakeProber(health, ["tiny"])
    sup, rec = make("--capture", capture("startup_pressure.log"), http=prober, recorder=rec)
    f = flags(served_model_name="tiny")
    await sup.start(f)
    assert await sup.wait_settled(30) is ServerState.READY
    assert prober.calls >= 1
    assert set(prober.urls) == {f"http://127.0.0.1:{f.port}"}
    assert rec.of(Ready)[0].kv_cache_tokens == 2048


async def test_stop_escalates_and_kills_the_whole_tree(make: Any) -> None:
    sup, rec = make(
        "--health-after",
        "0",
        "--ignore-term",
        "--child",
        "--child-ignores-term",
        "--orphan",
    )
    await sup.start(flags())
    assert await sup.wait_settled(30) is ServerState.READY
    await rec.wait_line("FAKE orphan pid=")
    pids = [rec.of(Launched)[0].pid, *rec.pids("child"), *rec.pids("orphan")]
    assert len(pids) == 3
    await sup.stop()
    report = sup.last_termination
    assert report is not None
    assert report.escalated  # SIGTERM was ignored by the server and its child
    assert report.clean
    assert all(gone(pid) for pid in pids)
    assert rec.events[-1] == Exited(exit_code=-signal.SIGKILL, requested=True)
    assert sup.state is ServerState.STOPPED


async def test_orphans_die_when_the_api_server_is_killed_alone(make: Any) -> None:
    sup, rec = make("--health-after", "0", "--child", "--orphan")
    await sup.start(flags())
    assert await sup.wait_settled(30) is ServerState.READY
    await rec.wait_line("FAKE orphan pid=")
    await until(lambda: len(sup.known_processes) >= 3, "a snapshot of the whole tree")
    [child], [orphan] = rec.pids("child"), rec.pids("orphan")
    # The supervisor remembers the tree it saw while the API server lived.
    assert {child, orphan} <= {p.pid for p in sup.known_processes}
    pid = sup.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # as the OOM killer would: only the API server dies
    assert await sup.wait_finished(30) is ServerState.FAILED
    assert gone(child)
    assert gone(orphan)  # own session, parent dead: found only through the remembered tree
    failed, exited = rec.of(Failed), rec.of(Exited)
    assert failed[0].diagnosis.facts["signal"] == "SIGKILL"
    assert exited == [Exited(exit_code=-signal.SIGKILL, requested=False)]
    assert rec.kinds()[-2:] == ["Failed", "Exited"]


async def test_engine_death_after_ready_is_failed_then_exited(make: Any) -> None:
    sup, rec = make(
        "--capture",
        capture("try_headdim16_kv1.log"),
        "--until",
        "Application startup complete",
        "--health-after",
        "0",
        "--exit",
        "0",
        "--exit-on-usr1",
    )
    await sup.start(flags())
    assert await sup.wait_settled(30) is ServerState.READY
    os.kill(sup.pid, signal.SIGUSR1)  # its engine dies now, after Ready was seen
    assert await sup.wait_finished(30) is ServerState.FAILED
    [failed] = rec.of(Failed)
    assert failed.exit_code == 0  # vLLM exits 0 when its engine died
    assert failed.diagnosis.kind == "engine_died"
    assert failed.diagnosis.facts["head_dim"] == 16
    assert rec.kinds()[-3:] == ["Ready", "Failed", "Exited"]
    assert rec.events[-1] == Exited(exit_code=0, requested=False)


async def test_clean_exit_after_ready_is_only_exited(make: Any) -> None:
    sup, rec = make(
        "--capture",
        capture("startup_eager_kv64M.log"),
        "--until",
        "Application startup complete",
        "--health-after",
        "0",
        "--exit",
        "0",
        "--exit-on-usr1",
    )
    await sup.start(flags())
    assert await sup.wait_settled(30) is ServerState.READY
    os.kill(sup.pid, signal.SIGUSR1)  # it exits cleanly, after Ready was seen
    assert await sup.wait_finished(30) is ServerState.STOPPED
    assert rec.of(Failed) == []
    assert rec.events[-1] == Exited(exit_code=0, requested=False)


async def test_stop_during_startup_is_a_requested_exit(make: Any) -> None:
    sup, rec = make("--capture", capture("startup_eager_kv64M.log"), "--until", "Starting to load")
    await sup.start(flags())
    await _until_stage(rec, Stage.LOADING_WEIGHTS)
    await sup.stop()
    assert sup.state is ServerState.STOPPED
    assert rec.of(Failed) == []
    assert rec.events[-1] == Exited(exit_code=0, requested=True)
    await sup.stop()  # idempotent
    assert len(rec.of(Exited)) == 1


async def test_secrets_go_through_env_and_are_redacted(make: Any) -> None:
    secret = "sk-test-secret-42"
    sup, rec = make("--echo-env", "VLLM_API_KEY", "--exit", "0", env={"VLLM_API_KEY": secret})
    await sup.start(flags())
    await sup.wait_finished(30)
    assert all(secret not in arg for arg in sup.argv)
    assert "FAKE env VLLM_API_KEY=***" in [e.text for e in rec.of(LogLine)]
    log_path = sup.log_path
    assert log_path is not None
    assert secret not in log_path.read_text()


async def test_the_runs_environment_reaches_the_server_not_its_argv(make: Any) -> None:
    # issue 19: the run's environment is configuration; the launcher's own (credentials,
    # a lane's GPUs) is applied over it
    sup, rec = make(
        "--echo-env",
        "VLLM_USE_V2_MODEL_RUNNER",
        "--echo-env",
        "CUDA_VISIBLE_DEVICES",
        "--exit",
        "0",
        env={"CUDA_VISIBLE_DEVICES": "3"},
    )
    await sup.start(flags(env={"VLLM_USE_V2_MODEL_RUNNER": "0", "CUDA_VISIBLE_DEVICES": "1"}))
    await sup.wait_finished(30)
    assert not any("VLLM_USE_V2_MODEL_RUNNER=" in arg for arg in sup.argv)  # the fake echoes it
    lines = [e.text for e in rec.of(LogLine)]
    assert "FAKE env VLLM_USE_V2_MODEL_RUNNER=0" in lines
    assert "FAKE env CUDA_VISIBLE_DEVICES=3" in lines


async def test_start_takes_serve_flags_only(make: Any) -> None:
    sup, rec = make()
    with pytest.raises(TypeError, match="ServeFlags"):
        await sup.start({"model": MODEL, "max_num_seqs": 0})
    assert rec.events == []
    assert sup.pid is None


async def test_second_start_while_running_is_refused(make: Any) -> None:
    sup, _ = make("--health-after", "0")
    await sup.start(flags())
    with pytest.raises(RuntimeError, match="already"):
        await sup.start(flags())
    await sup.stop()


async def test_missing_executable_fails_cleanly(tmp_path: Path) -> None:
    rec = Recorder()
    sup = Supervisor([str(tmp_path / "no-such-vllm")], None, tmp_path, rec)
    await sup.start(flags())
    assert sup.state is ServerState.FAILED
    [failed] = rec.of(Failed)
    assert failed.diagnosis.kind == "unknown"
    assert "cannot launch" in failed.diagnosis.summary
    await sup.aclose()


async def test_a_broken_listener_does_not_break_supervision(tmp_path: Path) -> None:
    seen: list[ServerEvent] = []

    def listener(event: ServerEvent) -> None:
        seen.append(event)
        raise RuntimeError("listener bug")

    sup = Supervisor(
        [
            sys.executable,
            str(FAKE),
            "--capture",
            capture("fail_b4_unknown_flag.log"),
            "--exit",
            "2",
        ],
        None,
        tmp_path,
        listener,
        poll_interval_s=0.05,
    )
    await sup.start(flags())
    assert await sup.wait_settled(30) is ServerState.FAILED
    assert isinstance(seen[-1], Failed)
    assert seen[-1].diagnosis.kind == "unknown_flag"
    await sup.aclose()


def test_bad_constructor_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="argv list"):
        Supervisor("vllm", None, tmp_path, lambda e: None)
    with pytest.raises(ValueError, match="poll_interval_s"):
        Supervisor(["vllm"], None, tmp_path, lambda e: None, poll_interval_s=0)


# -- the launcher and its servers -------------------------------------------------------------
@pytest.fixture
async def launcher(tmp_path: Path) -> AsyncIterator[Callable[..., ProcessLauncher]]:
    """Makes launchers of the fake; every server they made is stopped at teardown."""
    made: list[ProcessLauncher] = []
    servers: list[LaunchedServer] = []

    def factory(*fake_args: str, **kw: Any) -> ProcessLauncher:
        options = {"startup_timeout_s": 60.0, "grace_s": 0.3, "poll_interval_s": 0.05, **kw}
        made_launcher = ProcessLauncher(
            [sys.executable, str(FAKE), *fake_args], log_dir=tmp_path / "logs", **options
        )
        real_launch = made_launcher.launch

        async def launch(*args: Any, **kwargs: Any) -> LaunchedServer:
            server = await real_launch(*args, **kwargs)
            servers.append(server)
            return server

        made_launcher.launch = launch  # type: ignore[method-assign]
        made.append(made_launcher)
        return made_launcher

    yield factory
    for server in servers:
        await server.stop()
        for info in server.known_processes:  # a detached one is ours to clean up too
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(info.pid, signal.SIGKILL)
        if server.relay_pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(server.relay_pid, signal.SIGKILL)
    for item in made:
        await item.aclose()


async def test_a_launched_server_can_stop_and_detach_and_is_local(launcher: Any) -> None:
    rec = Recorder()
    server = await launcher("--health-after", "0").launch(flags(), rec)
    assert server.capabilities == LAUNCHED
    assert server.capabilities.can_stop and server.capabilities.can_detach
    assert server.capabilities.local
    assert await server.wait_settled(30) is ServerState.READY
    assert server.pid is not None and server.pid in server.pids()
    await server.stop()
    assert rec.events[-1] == Exited(exit_code=0, requested=True)


async def test_detach_is_refused_when_there_is_nothing_to_leave(launcher: Any) -> None:
    # Refused before launch: the port is someone else's.
    rec = Recorder()
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        refused = await launcher().launch(ServeFlags(model=MODEL, port=port), rec)
    assert refused.state is ServerState.FAILED and refused.pid is None
    assert await refused.detach() is False
    # Ended on its own: nothing left to leave running.
    ended = await launcher("--exit", "3").launch(flags(), Recorder())
    assert await ended.wait_finished(30) is ServerState.FAILED
    assert await ended.detach() is False
    # Stopped by the console.
    stopped = await launcher("--health-after", "0").launch(flags(), Recorder())
    await stopped.stop()
    assert await stopped.detach() is False
    assert stopped.state is ServerState.STOPPED


async def test_a_detached_server_runs_on_and_its_log_keeps_growing(launcher: Any) -> None:
    rec = Recorder()
    server = await launcher("--health-after", "0", "--tick", "0.05").launch(flags(), rec)
    assert await server.wait_settled(30) is ServerState.READY
    await rec.wait_line("FAKE tick 2")
    pid, relay, log_path = server.pid, server.relay_pid, server.log_path
    assert pid is not None and relay is not None and log_path is not None

    assert await server.detach() is True
    seen = len(rec.events)
    assert not gone(pid) and not gone(relay)  # the server and its relay run on
    # Nobody of this console reads the relay any more, and the file still grows.
    before = log_path.read_text().count("FAKE tick")
    await until(lambda: log_path.read_text().count("FAKE tick") > before + 3, "more ticks")
    text = log_path.read_text()
    assert "[vtc] detached: the log goes on here" in text
    assert len(rec.events) == seen  # no event after the detach
    assert server.state is ServerState.READY  # as it was left
    assert await server.detach() is False  # once
    await server.stop()  # a detached server is no longer this console's to stop
    assert not gone(pid)
    os.killpg(pid, signal.SIGKILL)
    await until(lambda: gone(relay), "the relay to end at end of file")


async def test_loopback_is_the_default_host(launcher: Any) -> None:
    rec = Recorder()
    made = launcher("--health-after", "0")
    plain = await made.launch(flags_without_host(), rec)
    assert plain.flags.host == DEFAULT_HOST == "127.0.0.1"
    argv = rec.of(Launched)[0].argv
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    await plain.stop()
    # A host the operator set is kept, in the form or in extra arguments.
    assert with_default_host(ServeFlags(model=MODEL, host="0.0.0.0")).host == "0.0.0.0"
    assert with_default_host(ServeFlags(model=MODEL), ["--host", "::"]).host is None
    # (a declared flag given in extra args moves into its field: the host is the operator's)
    assert with_default_host(ServeFlags(model=MODEL, extra_args=("--host=::",))).host == "::"
    assert with_default_host(ServeFlags(model=MODEL), host=None).host is None


def flags_without_host(**kw: Any) -> ServeFlags:
    return ServeFlags(model=MODEL, port=free_port(), **kw)


async def test_the_cause_is_what_the_server_wrote_before_it_died(launcher: Any) -> None:
    """The API server is killed; its orphaned EngineCore, signalled by the console's own
    teardown afterwards, writes an engine-death traceback. That is not the cause."""
    rec = Recorder()
    server = await launcher("--health-after", "0", "--orphan", "--orphan-dies-loudly").launch(
        flags(), rec
    )
    assert await server.wait_settled(30) is ServerState.READY
    await rec.wait_line("FAKE orphan pid=")
    await until(lambda: len(server.known_processes) >= 2, "a snapshot with the orphan")
    [orphan] = rec.pids("orphan")
    assert server.pid is not None
    os.kill(server.pid, signal.SIGKILL)
    assert await server.wait_finished(30) is ServerState.FAILED
    [failed] = rec.of(Failed)
    assert failed.diagnosis.kind != "engine_died"
    assert failed.diagnosis.facts["signal"] == "SIGKILL"
    assert gone(orphan)
    # Its dying words were written (after the card), and kept in the log.
    assert any("RuntimeError: cancelled" in line for line in server.log_lines)
    assert server.log_path is not None
    assert "RuntimeError: cancelled" in server.log_path.read_text()
    assert rec.kinds()[-2:] == ["Failed", "Exited"]


async def test_the_card_does_not_wait_for_the_orphans_to_die(launcher: Any) -> None:
    """An orphan that ignores SIGTERM lives until SIGKILL after the grace period; the
    failure is reported before that, from the log as the server left it."""
    rec = Recorder()
    orphan_alive_at_failed: list[bool] = []

    def sink(event: Any) -> None:
        rec(event)
        if isinstance(event, Failed):
            orphan_alive_at_failed.extend(not gone(pid) for pid in rec.pids("orphan"))

    made = launcher(
        "--capture",
        capture("fail_a1_maxlen65536_kvbytes16M.log"),
        "--orphan",
        "--orphan-ignores-term",
        "--exit",
        "1",
        grace_s=30.0,
    )
    server = await made.launch(flags(), sink)
    failed = await rec.wait_for(Failed)
    assert failed.diagnosis.kind == "kv_cache_too_small"
    assert orphan_alive_at_failed == [True]
    [orphan] = rec.pids("orphan")
    assert server.state is ServerState.FAILED
    settled = asyncio.ensure_future(server.wait_settled())
    # Settled once the tree is gone, not before: the orphan lives until killed, so settling
    # comes after the kill, and finds it gone.
    order: list[str] = []
    settled.add_done_callback(lambda _: order.append("settled"))
    for _ in range(20):  # the waiter runs until it blocks on the tree (loop turns, no clock)
        await asyncio.sleep(0)
    assert not gone(orphan)
    order.append("killed")
    os.kill(orphan, signal.SIGKILL)  # rather than wait out the grace period
    assert await settled is ServerState.FAILED
    assert order == ["killed", "settled"]
    assert gone(orphan)
    await server.stop()  # nothing left to do
    assert rec.kinds() == ["Launched", "Failed"]


async def test_a_stop_after_the_exit_reports_the_exit(launcher: Any) -> None:
    rec = Recorder()
    made = launcher(
        "--capture",
        capture("try_headdim16_kv1.log"),
        "--until",
        "Application startup complete",
        "--health-after",
        "0",
        "--exit",
        "0",
        "--exit-on-usr1",
    )
    server = await made.launch(flags(), rec)
    assert await server.wait_settled(30) is ServerState.READY
    assert server.pid is not None
    os.kill(server.pid, signal.SIGUSR1)
    await until(lambda: server.exit_code is not None, "the exit to be noticed")
    await server.stop()  # the console's teardown, after the exit: not the cause
    assert [e for e in rec.of(Exited)] == [Exited(exit_code=0, requested=False)]
    assert rec.of(Failed)[0].diagnosis.kind == "engine_died"
    assert server.state is ServerState.FAILED


async def test_a_raising_sink_never_stops_the_watching(launcher: Any) -> None:
    seen: list[Any] = []

    def sink(event: Any) -> None:
        seen.append(event)
        raise RuntimeError("listener bug")

    server = await launcher("--health-after", "0").launch(flags(), sink)
    assert await server.wait_settled(30) is ServerState.READY
    await server.stop()
    assert isinstance(seen[-1], Exited) and seen[-1].requested
    assert any(isinstance(e, Ready) for e in seen)


async def test_release_leaves_the_server_running(launcher: Any) -> None:
    server = await launcher("--health-after", "0").launch(flags(), Recorder())
    assert await server.wait_settled(30) is ServerState.READY
    pid = server.pid
    assert pid is not None
    await server.aclose()  # never stops the server
    assert not gone(pid)
    assert await server.detach() is False  # already let go
    os.killpg(pid, signal.SIGKILL)


@pytest.mark.parametrize("use_pidfd", [True, False], ids=["pidfd", "thread"])
async def test_the_exit_status_is_seen_with_or_without_a_pidfd(use_pidfd: bool) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(7)"])
    watch = ExitWatch(proc, use_pidfd=use_pidfd)
    assert watch.method == ("pidfd" if use_pidfd else "thread")
    assert await asyncio.wait_for(watch.future, 30) == 7
    assert watch.at is not None and proc.returncode == 7
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    released = ExitWatch(sleeper, use_pidfd=use_pidfd)
    released.release()  # a detach: stop watching, never signal
    assert released.future.cancelled() and sleeper.poll() is None
    sleeper.kill()
    sleeper.wait(timeout=10)


async def test_a_cancelled_stop_call_ends_but_the_stop_goes_on(launcher: Any) -> None:
    rec = Recorder()
    server = await launcher("--health-after", "0", "--ignore-term", grace_s=2.0).launch(
        flags(), rec
    )
    assert await server.wait_settled(30) is ServerState.READY
    caller = asyncio.create_task(server.stop())
    await until(lambda: server.state is ServerState.STOPPING, "the stop to begin")
    caller.cancel()  # e.g. the console's worker cancelled while it waited
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert await server.wait_finished(30) is ServerState.STOPPED  # the lifecycle finished it
    assert rec.events[-1] == Exited(exit_code=-signal.SIGKILL, requested=True)
