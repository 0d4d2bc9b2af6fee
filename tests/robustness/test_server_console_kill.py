"""A console SIGKILLed while its server serves: the server keeps serving, its log file keeps
growing (the relay belongs to the server's session, not the console), and the next watcher
adopts it from the state file, follows its log and stops it whole.

Real processes, real sockets, real files: a console process (launcher + state file, as the
console does), the simulator (``python -m tui.sim serve``) and, marked ``realvllm``, the
real CPU build of vLLM."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from fakes.net import free_port, gone
from fakes.real_vllm import SETTLE_GUARD_S, STARTUP_GUARD_S
from fakes.waiting import Recorder, until

from tui.domain.events import Exited, Ready
from tui.server.adopted import AdoptedServer, check_record, inspect_state_file
from tui.server.process import ProcessInfo, snapshot_tree
from tui.server.provision import find_provisioned
from tui.store.server_state import ServerStateFile

SIM_MODEL = "meta-llama/Llama-3.2-3B-Instruct"
PROVISIONED = find_provisioned()

# A console in miniature: launch, record the state file, say READY, then wait to be killed.
CONSOLE = r"""
import asyncio, json, sys
from pathlib import Path
from tui.domain.events import Failed, Ready
from tui.domain.flags.serve import ServeFlags
from tui.server.adopted import ServerStateKeeper
from tui.server.launcher import ProcessLauncher
from tui.store.server_state import ServerStateFile

async def main(cfg):
    done = asyncio.get_running_loop().create_future()
    def sink(event):
        if isinstance(event, (Ready, Failed)) and not done.done():
            done.set_result(event)
    launcher = ProcessLauncher(cfg["command"], log_dir=Path(cfg["log_dir"]), env=cfg["env"],
                               startup_timeout_s=cfg["timeout"], grace_s=5)
    server = await launcher.launch(ServeFlags.model_validate(cfg["flags"]), sink,
                                   extra_args=cfg["extra"])
    if server.pid is not None:
        ServerStateKeeper(ServerStateFile(Path(cfg["state"])), mode="test").record(
            pid=server.pid, argv=server.argv, base_url=server.base_url, flags=server.flags,
            log_path=str(server.log_path), run_id=None)
    event = await done
    print("READY" if isinstance(event, Ready) else f"FAILED {event.diagnosis.summary}",
          flush=True)
    await asyncio.Event().wait()

asyncio.run(main(json.loads(sys.argv[1])))
"""


@pytest.fixture
def leftovers() -> Iterator[list[int]]:
    """Process groups a test may leave behind: SIGKILLed afterwards, whatever happened."""
    groups: list[int] = []
    yield groups
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def relays_of(log_path: str) -> list[psutil.Process]:
    """The live relay processes writing ``log_path``."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        with contextlib.suppress(psutil.Error):
            if "tui.server.relay" in cmd and log_path in cmd and proc.status() != "zombie":
                found.append(proc)
    return found


async def start_console(cfg: dict[str, Any], timeout: float) -> subprocess.Popen[str]:
    console = subprocess.Popen(
        [sys.executable, "-c", CONSOLE, json.dumps(cfg)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert console.stdout is not None
    try:
        said = await asyncio.wait_for(asyncio.to_thread(console.stdout.readline), timeout)
    except TimeoutError:
        console.kill()
        raise
    assert said.strip() == "READY", f"the console's server did not start: {said!r}"
    return console


async def complete(base_url: str, model: str, api_key: str | None = None) -> None:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with httpx.AsyncClient(trust_env=False, timeout=120, headers=headers) as client:
        # Not a one-word prompt: on this project's CI host (Xeon with AMX) the CPU build's
        # worker dies of SIGILL (exit -4) on the first forward of a 1-2 token prompt, with or
        # without a console (seen 2026-11-28); a sentence takes the kernels every other
        # real-vLLM test uses. The console kill is what this test is about.
        prompt = "The console was killed, and the server it started keeps serving requests."
        body = {"model": model, "prompt": prompt, "max_tokens": 4}
        response = await client.post(base_url + "/v1/completions", json=body)
        assert response.status_code == 200, response.text


async def kill_console_then_adopt(
    cfg: dict[str, Any], model: str, leftovers: list[int], *, startup_s: float
) -> None:
    state = ServerStateFile(Path(cfg["state"]))
    console = await start_console(cfg, startup_s)
    record = state.read()
    assert record is not None and record.log_path is not None
    leftovers.append(record.pgid)
    log = Path(record.log_path)
    assert record.console_pid == console.pid
    assert "--host" in record.argv  # launched on loopback unless told otherwise

    console.kill()  # SIGKILL: no handler, no detach, no goodbye
    console.wait(timeout=30)
    assert check_record(record).running
    [relay] = relays_of(str(log))
    async with httpx.AsyncClient(trust_env=False, timeout=10) as client:
        assert (await client.get(record.base_url + "/health")).status_code == 200
    size = log.stat().st_size
    await complete(record.base_url, model, cfg["env"].get("VLLM_API_KEY"))
    await until(lambda: b"POST /v1/completions" in log.read_bytes()[size:], "the access line")

    # The next console: the record is free (its console is dead), adopt it.
    found = inspect_state_file(state)
    assert found.record is not None and found.record.pid == record.pid
    rec = Recorder()
    adopted = AdoptedServer(
        found.record, poll_interval_s=0.1, grace_s=10, api_key=cfg["env"].get("VLLM_API_KEY")
    )
    try:
        takeover = await adopted.connect(rec)
        assert takeover.flags.model == model
        adopted.watch()
        ready = await rec.wait_for(Ready)
        assert ready.timed is False
        count = sum("POST /v1/completions" in line for line in rec.lines())
        await complete(record.base_url, model, cfg["env"].get("VLLM_API_KEY"))
        await rec.wait(
            lambda: sum("POST /v1/completions" in line for line in rec.lines()) > count,
            "the new access line, tailed from the file",
        )
        tree = snapshot_tree(record.pid)
        await adopted.stop()
    finally:
        await adopted.aclose()
    assert rec.of(Exited)[-1].requested
    assert all(gone(p.pid) for p in tree), [p for p in tree if not gone(p.pid)]
    assert adopted.last_termination is not None and adopted.last_termination.clean
    await until(lambda: not ProcessInfo(relay.pid, relay.create_time()).is_alive(), "relay EOF")


async def test_a_killed_console_leaves_its_simulator_serving_and_logging(
    tmp_path: Path, leftovers: list[int]
) -> None:
    flags = {"model": SIM_MODEL, "port": free_port()}
    cfg = {
        "command": [sys.executable, "-m", "tui.sim"],
        "log_dir": str(tmp_path / "logs"),
        "env": {},
        "timeout": 120,
        "flags": flags,
        "extra": ["--sim-gpu", "h100-80gb", "--sim-speed", "50"],
        "state": str(tmp_path / "server.json"),
    }
    await kill_console_then_adopt(cfg, SIM_MODEL, leftovers, startup_s=120)


@pytest.mark.realvllm
@pytest.mark.skipif(PROVISIONED is None, reason="real vLLM not provisioned (vtc setup-cpu-vllm)")
async def test_a_killed_console_leaves_real_vllm_serving_logging_and_adoptable(
    tmp_path: Path, leftovers: list[int]
) -> None:
    assert PROVISIONED is not None
    model = str(PROVISIONED.model)
    flags = {
        "model": model,
        "port": free_port(),
        "enforce_eager": True,
        "kv_cache_memory_bytes": 64 * 2**20,
    }
    cfg = {
        "command": [str(PROVISIONED.vllm)],
        "log_dir": str(tmp_path / "logs"),
        "env": {"HF_HUB_OFFLINE": "1", "VLLM_API_KEY": "sk-vtc-kill-test"},
        "timeout": STARTUP_GUARD_S,
        "flags": flags,
        "extra": [],
        "state": str(tmp_path / "server.json"),
    }
    await kill_console_then_adopt(cfg, model, leftovers, startup_s=SETTLE_GUARD_S)
    logs = list((tmp_path / "logs").glob("serve-*.log"))
    assert logs and all("sk-vtc-kill-test" not in p.read_text() for p in logs)
