"""A key on the serve command line: the server requires it, the console's load sends it,
and it is nowhere it could leak (argv, `ps`, the history, the state file, the log file)."""

from __future__ import annotations

from pathlib import Path

import psutil
from fakes.waiting import until

from tui.domain.events import ServerState
from tui.domain.workload import LoadSpec
from tui.modes import ConsoleOptions, build_session
from tui.session import wait_for_state

KEY = "sk-vtc-test-8c41f09e77"
MODEL = "meta-llama/Llama-3.2-1B-Instruct"


async def test_a_key_on_the_serve_line_is_moved_into_the_environment(tmp_path: Path) -> None:
    options = ConsoleOptions(
        demo=True,
        sim_speed=50,
        data_dir=tmp_path,
        poll_interval_s=0.2,
        serve_args=["serve", MODEL, "--api-key", KEY, "--max-model-len", "512"],
    )
    session = build_session(options)
    assert KEY not in session.info.initial_flags.model_dump_json()
    assert any("VLLM_API_KEY" in n for n in session.info.notices)  # says where it went
    await session.start()
    try:
        assert await wait_for_state(session, {ServerState.READY, ServerState.FAILED}, 60) is (
            ServerState.READY
        )
        assert session.pid is not None
        server = psutil.Process(session.pid)
        assert KEY not in " ".join(server.cmdline())  # `ps` never shows it
        assert server.environ().get("VLLM_API_KEY") == KEY  # the server requires it
        result = await session.run_load(LoadSpec(input_len=16, output_len=4, num_prompts=4))
        assert result is not None and result.completed == 4 and result.failed == 0
        state_files = list(tmp_path.glob("*.json"))
        assert state_files and all(KEY not in f.read_text() for f in state_files)
        run = session.current
        assert run is not None and run.log_path is not None
        await until(lambda: Path(run.log_path or "").stat().st_size > 0, "the log file")
    finally:
        await session.close()
    stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert KEY.encode() not in stored  # history (SQLite, WAL), state file, log files
