"""The supervisor against the real CPU vLLM 0.32.0 (``vtc setup-cpu-vllm``), one launch.

Slow (20-60 s on a 2-core machine): deselect with ``-m "not realvllm"``. Skips with a
reason when vLLM is not provisioned. What it proves that the fake cannot: readiness and the
KV report from a real server, and that killing the API server alone (SIGKILL, as the OOM
killer would) leaves no orphaned EngineCore/Worker behind.
"""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import psutil
import pytest

from tui.domain.events import Exited, Failed, KvCacheReported, Ready, ServerEvent, ServerState
from tui.domain.flags import ServeFlags
from tui.server.provision import find_provisioned
from tui.server.supervisor import Supervisor

pytestmark = pytest.mark.realvllm

PROVISIONED = find_provisioned()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.skipif(PROVISIONED is None, reason="real vLLM not provisioned (vtc setup-cpu-vllm)")
async def test_real_vllm_ready_then_api_server_killed_leaves_no_orphans(tmp_path: Path) -> None:
    assert PROVISIONED is not None
    events: list[ServerEvent] = []
    sup = Supervisor(
        [str(PROVISIONED.vllm)],
        {"HF_HUB_OFFLINE": "1", "VLLM_API_KEY": "sk-vtc-test-secret"},
        tmp_path,
        events.append,
        startup_timeout_s=300,
        grace_s=5,
    )
    flags = ServeFlags(
        model=str(PROVISIONED.model),
        host="127.0.0.1",
        port=_free_port(),
        enforce_eager=True,
        kv_cache_memory_bytes=64 * 2**20,
    )
    try:
        await sup.start(flags)
        assert await sup.wait_settled(300) is ServerState.READY, [
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
        assert all(_gone(p.pid) for p in tree), [p for p in tree if not _gone(p.pid)]
        assert isinstance(events[-1], Exited)
        assert events[-1].exit_code == -signal.SIGKILL
        log_path = sup.log_path
        assert log_path is not None
        assert "sk-vtc-test-secret" not in log_path.read_text()
    finally:
        await sup.aclose()
