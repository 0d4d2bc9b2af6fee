"""Plain `vtc` (no model named) reattaches to the server the last console left running.

The local-vLLM mode, with a `vllm` executable that is the simulator (a wrapper script, as a
venv's console script would be): the first console launches, the terminal hangs up
(detach), and a second console started with no model, preset or command line adopts the
same server instead of refusing with "name a model".
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import psutil

from tui.domain.events import ServerState
from tui.domain.flags.serve import ServeFlags
from tui.modes import ConsoleOptions, build_session
from tui.session import wait_for_state

MODEL = "meta-llama/Llama-3.2-1B-Instruct"


def vllm_wrapper(tmp_path: Path) -> Path:
    """A console script like a venv's ``vllm`` (``#!python``), running the simulator."""
    exe = tmp_path / "bin" / "vllm"
    exe.parent.mkdir()
    exe.write_text(
        f"#!{sys.executable}\nimport sys\nfrom tui.sim.cli import main\n"
        "sys.exit(main([*sys.argv[1:], '--sim-speed', '50']))\n"
    )
    exe.chmod(0o755)
    return exe


async def test_plain_vtc_reattaches_to_the_server_it_left(tmp_path: Path) -> None:
    vllm = str(vllm_wrapper(tmp_path))
    data = tmp_path / "data"
    first = build_session(
        ConsoleOptions(
            vllm=vllm,
            data_dir=data,
            poll_interval_s=0.2,
            serve_args=["serve", MODEL, "--max-model-len", "512"],
        )
    )
    pid = None
    try:
        await first.start()
        await first.restart(first.info.initial_flags)
        assert await wait_for_state(first, {ServerState.READY, ServerState.FAILED}, 60) is (
            ServerState.READY
        )
        pid = first.pid
        assert await first.detach() is True  # the terminal hung up: the server runs on
        second = build_session(ConsoleOptions(vllm=vllm, data_dir=data, poll_interval_s=0.2))
        assert second.info.initial_flags == ServeFlags(model=MODEL, max_model_len=512)
        assert any("Reattached" in n for n in second.info.notices)
        await second.start()
        try:
            assert await wait_for_state(second, {ServerState.READY}, 30) is ServerState.READY
            assert second.pid == pid and second.current is not None
            assert second.current.flags.model == MODEL
        finally:
            await second.close()  # q: stops what it adopted
        assert (pid is not None and not psutil.pid_exists(pid)) or (
            psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        )
    finally:
        if pid is not None and psutil.pid_exists(pid):
            os.killpg(pid, signal.SIGKILL)
