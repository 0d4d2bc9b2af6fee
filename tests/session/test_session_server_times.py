"""The server's own TTFT and queue time beside the client's, through the console's load
(issue 19): a simulated vLLM 0.33 with ``--enable-per-request-metrics`` reports them on the
last streamed usage chunk, the console's load process records them, and the board puts
"srv TTFT p50" beside "TTFT p50"."""

from __future__ import annotations

from pathlib import Path

from tui.domain.board.metrics import SERVER_TTFT_P50, TTFT_P50
from tui.domain.board.table import build_table
from tui.domain.events import ServerState
from tui.domain.workload import LoadSpec
from tui.modes import ConsoleOptions, build_session
from tui.session import wait_for_state


async def test_the_consoles_load_records_the_servers_times_beside_its_own(
    tmp_path: Path,
) -> None:
    options = ConsoleOptions(
        demo=True, sim_speed=50, data_dir=tmp_path, poll_interval_s=0.2, autostart=False
    )
    session = build_session(options)
    try:
        flags = session.info.initial_flags.replace(extra_args=("--enable-per-request-metrics",))
        await session.restart(flags)
        state = await wait_for_state(session, {ServerState.READY, ServerState.FAILED}, 60)
        assert state is ServerState.READY
        result = await session.run_load(
            LoadSpec(input_len=32, output_len=8, num_prompts=6, max_concurrency=2)
        )
        assert result is not None and result.completed == 6
        for key in ("mean_server_ttft_ms", "median_server_ttft_ms", "mean_server_queue_time_ms"):
            assert key in result.stats and result.stats[key] >= 0, key
        run = session.current
        assert run is not None and run.bench == result
        table = build_table([run])
        titles = [c.title for c in table.columns]
        assert titles.index(SERVER_TTFT_P50.label) == titles.index(TTFT_P50.label) + 1
        cell = table.rows[0].cells[titles.index(SERVER_TTFT_P50.label)]
        assert cell.text not in ("", "-")
    finally:
        await session.close()
