"""Every load is kept (issue 23): three loads on one server are three results, on the
board, in ``vtc runs`` and in the report, each with its own workload and its client.

Through the real services and the simulator, as ``vtc --demo`` builds them; the loads run
in their own processes (the console's worker)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tui.cli import main
from tui.domain.events import ServerState
from tui.domain.workload import LoadSpec
from tui.modes import ConsoleOptions, build_session
from tui.session import wait_for_state


async def test_three_loads_on_one_server_are_three_results_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VTC_DATA_DIR", str(tmp_path))
    options = ConsoleOptions(demo=True, sim_speed=50, data_dir=tmp_path, poll_interval_s=0.2)
    session = build_session(options)
    await session.start()  # the demo autostarts its preset
    try:
        assert await wait_for_state(session, {ServerState.READY, ServerState.FAILED}, 60) is (
            ServerState.READY
        )
        sizes = (8, 8, 4)
        results = [
            await session.run_load(
                LoadSpec(input_len=32, output_len=8, num_prompts=n, max_concurrency=4)
            )
            for n in sizes
        ]
    finally:
        await session.close()
    assert all(r is not None and r.client == "vtc-worker" for r in results)
    assert [r.completed for r in results if r] == list(sizes)

    capsys.readouterr()
    assert main(["runs", "--demo", "--json"]) == 0
    stored = [r for r in json.loads(capsys.readouterr().out) if r["bench"] is not None]
    assert [r["bench"]["completed"] for r in stored] == list(sizes)
    assert [r["workload"]["num_prompts"] for r in stored] == list(sizes)
    first = stored[0]["id"]
    assert [r["load_of"] for r in stored] == [None, first, first]
    assert len({r["created_at"] for r in stored}) == 3  # each its own time

    assert main(["runs", "--demo"]) == 0
    table = capsys.readouterr().out
    labels = [f"#{r['id']}" for r in stored]
    assert all(label in table for label in labels)

    report = tmp_path / "report.html"
    assert main(["report", "--demo", "-o", str(report)]) == 0
    html = report.read_text()
    assert all(label in html for label in labels)
