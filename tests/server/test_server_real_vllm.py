"""Launching and watching the real CPU vLLM 0.32.0 (``vtc setup-cpu-vllm``).

Slow (20-60 s a launch on a 2-core machine): deselect with ``-m "not realvllm"``. Skips
with a reason when vLLM is not provisioned. What it proves that the fake cannot: readiness
and the KV report from a real server, that killing the API server alone (SIGKILL, as the
OOM killer would) leaves no orphaned EngineCore/Worker behind and is not blamed on what the
orphans write when the teardown signals them, and that a launch listens on loopback and
stops whole, log relay included. (A console SIGKILLed under a real vLLM, then adoption:
tests/robustness/test_server_console_kill.py.)
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import psutil
import pytest
from fakes.net import free_port, gone
from fakes.real_vllm import SETTLE_GUARD_S, STARTUP_GUARD_S
from fakes.supervisor import Supervisor
from fakes.waiting import Recorder

from tui.domain.events import (
    Exited,
    Failed,
    KvCacheReported,
    Launched,
    Ready,
    ServerEvent,
    ServerState,
)
from tui.domain.flags.serve import ServeFlags
from tui.server.launcher import DEFAULT_HOST, ProcessLauncher
from tui.server.provision import find_provisioned

pytestmark = pytest.mark.realvllm

PROVISIONED = find_provisioned()


@pytest.mark.skipif(PROVISIONED is None, reason="real vLLM not provisioned (vtc setup-cpu-vllm)")
async def test_real_vllm_ready_then_api_server_killed_leaves_no_orphans(tmp_path: Path) -> None:
    assert PROVISIONED is not None
    events: list[ServerEvent] = []
    sup = Supervisor(
        [str(PROVISIONED.vllm)],
        {"HF_HUB_OFFLINE": "1", "VLLM_API_KEY": "sk-vtc-test-secret"},
        tmp_path,
        events.append,
        startup_timeout_s=STARTUP_GUARD_S,
        grace_s=5,
    )
    flags = ServeFlags(
        model=str(PROVISIONED.model),
        host="127.0.0.1",
        port=free_port(),
        enforce_eager=True,
        kv_cache_memory_bytes=64 * 2**20,
    )
    try:
        await sup.start(flags)
        assert await sup.wait_settled(SETTLE_GUARD_S) is ServerState.READY, [
            e for e in events if isinstance(e, Failed)
        ]
        kv = [e for e in events if isinstance(e, KvCacheReported)]
        assert kv and kv[0].device == "CPU" and kv[0].max_model_len == 4096
        ready = next(e for e in events if isinstance(e, Ready))
        assert ready.kv_cache_tokens == kv[0].tokens

        tree = sup.known_processes
        assert len(tree) >= 3  # API server, EngineCore, Worker (and resource_tracker)
        pid = sup.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # the API server alone
        await sup.wait_finished(60)
        assert all(gone(p.pid) for p in tree), [p for p in tree if not gone(p.pid)]
        assert isinstance(events[-1], Exited)
        assert events[-1].exit_code == -signal.SIGKILL
        # The cause is the kill, not what the orphans wrote when the teardown signalled them.
        [failed] = [e for e in events if isinstance(e, Failed)]
        assert failed.diagnosis.kind != "engine_died", failed.diagnosis
        assert failed.diagnosis.facts.get("signal") == "SIGKILL", failed.diagnosis
        log_path = sup.log_path
        assert log_path is not None
        assert "sk-vtc-test-secret" not in log_path.read_text()
    finally:
        await sup.aclose()


@pytest.mark.skipif(PROVISIONED is None, reason="real vLLM not provisioned (vtc setup-cpu-vllm)")
async def test_real_vllm_launch_ready_stop_on_loopback(tmp_path: Path) -> None:
    """The launcher's own path: launched on 127.0.0.1, ready, stopped whole, relay gone."""
    assert PROVISIONED is not None
    rec = Recorder()
    launcher = ProcessLauncher(
        [str(PROVISIONED.vllm)],
        log_dir=tmp_path,
        env={"HF_HUB_OFFLINE": "1"},
        startup_timeout_s=STARTUP_GUARD_S,
        grace_s=5,
    )
    flags = ServeFlags(
        model=str(PROVISIONED.model),
        port=free_port(),
        enforce_eager=True,
        kv_cache_memory_bytes=64 * 2**20,
    )
    server = await launcher.launch(flags, rec)
    try:
        assert await server.wait_settled(SETTLE_GUARD_S) is ServerState.READY, rec.of(Failed)
        argv = rec.of(Launched)[0].argv
        assert argv[argv.index("--host") + 1] == DEFAULT_HOST
        listening = {
            c.laddr.ip
            for p in server.known_processes
            for c in _connections(p.pid)
            if c.status == psutil.CONN_LISTEN and c.laddr.port == flags.port
        }
        assert listening == {"127.0.0.1"}
        tree = list(server.known_processes)
        relay = server.relay_pid
        assert len(tree) >= 3 and relay is not None
        await server.stop()
        assert rec.events[-1] == Exited(exit_code=server.exit_code, requested=True)
        assert server.last_termination is not None and server.last_termination.clean
        assert all(gone(p.pid) for p in tree) and gone(relay)
        assert server.log_path is not None
        assert "Application startup complete" in server.log_path.read_text()
    finally:
        await server.stop()
        await launcher.aclose()


def _connections(pid: int) -> list[Any]:
    try:
        return list(psutil.Process(pid).net_connections(kind="tcp"))
    except psutil.Error:
        return []
