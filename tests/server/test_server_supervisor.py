"""Supervisor end to end against a fake ``vllm`` (tests/server/fake_vllm.py) that replays
real CPU vLLM captures, serves /health, spawns children and exits on cue."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import psutil
import pytest

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
from tui.domain.flags import ServeFlags
from tui.server.supervisor import Supervisor

HERE = Path(__file__).resolve().parent
FAKE = HERE / "fake_vllm.py"
CAPTURES = HERE.parent / "captures"
MODEL = "/models/tiny-llama"
E = TypeVar("E")


class Recorder:
    """Collects the events a supervisor emits."""

    def __init__(self) -> None:
        self.events: list[ServerEvent] = []

    def __call__(self, event: ServerEvent) -> None:
        self.events.append(event)

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]

    def kinds(self) -> list[str]:
        """Event type names without the per-line noise."""
        return [type(e).__name__ for e in self.events if not isinstance(e, LogLine | StageReached)]

    def pids(self, label: str) -> list[int]:
        found = []
        for line in self.of(LogLine):
            m = re.fullmatch(rf"FAKE {label} pid=(\d+)", line.text)
            if m:
                found.append(int(m.group(1)))
        return found


class FakeProber:
    """A prober that answers from a script instead of HTTP."""

    def __init__(self, health: Callable[[int], int | None], models: list[str] | None) -> None:
        self._health = health
        self._models = models
        self.calls = 0
        self.urls: list[str] = []

    async def health(self, url: str) -> int | None:
        self.calls += 1
        self.urls.append(url)
        return self._health(self.calls)

    async def models(self, url: str) -> list[str] | None:
        return self._models


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (a zombie waiting for PID 1 counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


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
        "--capture", capture("startup_eager_kv64M.log"),
        "--until", "Application startup complete", "--health-after", "0.3",
        poll_interval_s=30.0,
    )  # fmt: skip
    await sup.start(flags(enforce_eager=True, kv_cache_memory_bytes=64 * 2**20))
    assert await sup.wait_settled(15) is ServerState.READY
    assert Stage.API_UP in {e.stage for e in rec.of(StageReached)}


async def test_ready_then_stop(make: Any) -> None:
    sup, rec = make(
        "--capture", capture("startup_eager_kv64M.log"),
        "--until", "Application startup complete", "--health-after", "0.1",
    )  # fmt: skip
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
        Stage.LAUNCHING, Stage.LOADING_WEIGHTS, Stage.PROFILING, Stage.KV_CACHE, Stage.API_UP,
        Stage.READY,
    ]  # fmt: skip
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
        "--capture", capture("fail_a1_maxlen65536_kvbytes16M.log"), "--exit", "1",
        startup_timeout_s=120.0,
    )  # fmt: skip
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
    prober = FakeProber(lambda _n: 200, [MODEL])
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
    async with asyncio.timeout(30):
        while not any(e.stage is stage for e in rec.of(StageReached)):
            await asyncio.sleep(0.02)


async def test_timeout_names_the_stage_it_stuck_in(make: Any) -> None:
    sup, rec = make(
        "--capture", capture("startup_eager_kv64M.log"), "--until", "Starting to load model",
    )  # fmt: skip
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
    prober = FakeProber(lambda _n: 200, ["some-other-model"])
    sup, rec = make("--capture", capture("startup_eager_kv64M.log"), http=prober)
    await sup.start(flags())
    async with asyncio.timeout(30):
        while prober.calls < 5 or Stage.API_UP not in {e.stage for e in rec.of(StageReached)}:
            await asyncio.sleep(0.02)
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
        "--health-after", "0", "--ignore-term", "--child", "--child-ignores-term", "--orphan",
    )  # fmt: skip
    await sup.start(flags())
    assert await sup.wait_settled(30) is ServerState.READY
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
        "--capture", capture("try_headdim16_kv1.log"), "--until", "Application startup complete",
        "--health-after", "0", "--exit", "0", "--exit-after", "0.3",
    )  # fmt: skip
    await sup.start(flags())
    assert await sup.wait_settled(30) is ServerState.READY
    assert await sup.wait_finished(30) is ServerState.FAILED
    [failed] = rec.of(Failed)
    assert failed.exit_code == 0  # vLLM exits 0 when its engine died
    assert failed.diagnosis.kind == "engine_died"
    assert failed.diagnosis.facts["head_dim"] == 16
    assert rec.kinds()[-3:] == ["Ready", "Failed", "Exited"]
    assert rec.events[-1] == Exited(exit_code=0, requested=False)


async def test_clean_exit_after_ready_is_only_exited(make: Any) -> None:
    sup, rec = make(
        "--capture", capture("startup_eager_kv64M.log"), "--until", "Application startup complete",
        "--health-after", "0", "--exit", "0", "--exit-after", "0.1",
    )  # fmt: skip
    await sup.start(flags())
    assert await sup.wait_settled(30) is ServerState.READY
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
