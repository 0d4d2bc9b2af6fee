"""A sweep stopped and resumed while another runs (issue 17, item 8), through the real
console at 80x24 (``vtc --demo``: the simulator): another process runs a sweep of its own on
the same data dir; the console's sweep is started from the sweep screen, stopped with ``x``
(no trial starts after it) and resumed with ``u``. The resume runs only the sweep this screen
ran, on its machine (the journal's), and its journal holds no trial twice; the other
sweep's journal and runs are never touched. Waits are on state, bounded; no timing checks.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Select
from ui_fakes import NoteLog

from tui.domain.sweep import SweepState
from tui.modes import ConsoleOptions, build_session
from tui.session.facade import Session
from tui.tune.journal import journal_path
from tui.ui.app import create_app
from tui.ui.screens.sweep import SweepScreen
from tui.ui.widgets.sweep_status import SweepStatusLine

# slow tier: two sweeps on simulator processes, stopped and resumed.
pytestmark = pytest.mark.slow

SIZE = (80, 24)
OTHER_SPEC = """
name = "other-process"
strategy = "grid"
objective = "output_throughput"
sim_gpu = "rtx3080-10gb"

[base]
model = "meta-llama/Llama-3.1-8B-Instruct"

[base.flags]
quantization = "fp8"
dtype = "float16"
max_model_len = 512
gpu_memory_utilization = 0.92
block_size = 32
max_num_batched_tokens = 1024

[parameters]
max_num_seqs = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]

[workload]
input_len = 32
output_len = 16
num_prompts = 4
"""


async def until(pilot: Pilot[None], done: Callable[[], bool], what: str) -> None:
    """Let the app run until ``done()`` holds; bounded (about 3 minutes), never a timing check."""
    for _ in range(1800):
        if done():
            return
        await pilot.pause(0.1)
    raise AssertionError(f"gave up waiting for {what}")


def trial_lines(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [line["trial"] for line in lines if "trial" in line]  # type: ignore[misc]


def header(path: Path) -> dict[str, object]:
    return json.loads(path.read_text().splitlines()[0])  # type: ignore[no-any-return]


@pytest.fixture
def other_sweep(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """``vtc sweep other.toml --demo`` in a process of its own, on the same data dir."""
    spec = tmp_path / "other.toml"
    spec.write_text(OTHER_SPEC)
    env = {**os.environ, "VTC_DATA_DIR": str(tmp_path / "data")}
    argv = [sys.executable, "-m", "tui.cli", "sweep", str(spec), "--demo", "--sim-speed", "50"]
    log = (tmp_path / "other.out").open("wb")
    proc = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    try:
        yield proc, tmp_path / "other.out"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()


@pytest.fixture
async def demo(tmp_path: Path) -> AsyncIterator[Session]:
    options = ConsoleOptions(
        demo=True,
        sim_speed=50,
        data_dir=tmp_path / "data",
        poll_interval_s=0.2,
        autostart=False,
    )
    session = build_session(options)
    try:
        yield session
    finally:
        await session.close()


def other_journal(data: Path) -> Path | None:
    found = [p for p in (data / "sweeps").glob("other-process-*.jsonl")]
    return found[0] if found else None


async def test_a_sweep_stopped_and_resumed_while_another_runs(
    demo: Session, other_sweep: tuple[subprocess.Popen[bytes], Path], tmp_path: Path
) -> None:
    proc, out = other_sweep
    data = tmp_path / "data"
    app = create_app(demo, clock=None)
    notes = NoteLog(app)  # every notification, also one whose toast has timed out
    async with app.run_test(size=SIZE) as pilot:
        form = app.main_screen.form
        for name, value in (("num_prompts", "4"), ("input_len", "32"), ("output_len", "16")):
            form.field(f"load-{name}").set_value(value)
        await until(pilot, lambda: other_journal(data) is not None, "the other sweep's journal")
        other = other_journal(data)
        assert other is not None
        app.main_screen.board.focus()
        await pilot.press("w")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, SweepScreen)
        screen.query_one("#sweep-strategy", Select).value = "grid"
        screen.query_one("#sweep-pvalues-0", Input).value = "8, 16, 32"
        screen.query_one("#sweep-pname-1", Input).value = ""
        screen.query_one("#sweep-trials", DataTable).focus()
        await pilot.press("g")
        sweeps = demo.info.sweeps
        assert sweeps is not None

        def finished() -> int:
            status = sweeps.status
            return len(status.trials) if status is not None else 0

        await until(pilot, lambda: finished() >= 1, "the first trial")
        await pilot.press("x")
        await until(pilot, lambda: not sweeps.running, "the stop")
        status = sweeps.status
        assert status is not None and status.state is SweepState.STOPPED
        mine = journal_path(data, status.sweep_id)
        stopped_at = len(trial_lines(mine))
        sweep_id = status.sweep_id

        def mine_runs() -> int:
            return sum(1 for r in demo.runs if r.sweep is not None and r.sweep.sweep_id == sweep_id)

        stopped_runs = mine_runs()
        assert stopped_runs <= stopped_at + 1  # the trial x cut short, at most: none after
        await pilot.pause(1.0)
        assert mine_runs() == stopped_runs  # still: x stopped before the next trial
        assert proc.poll() is None, out.read_text()[-2000:]  # the other sweep still runs
        await pilot.press("u")
        await until(pilot, lambda: sweeps.running, "the resume")
        assert "Resuming console-grid" in notes.text(), notes.text()
        await until(pilot, lambda: not sweeps.running, "the resumed sweep's end")
        status = sweeps.status
        assert status is not None and status.state is SweepState.DONE, status.message
        head = str(screen.query_one(SweepStatusLine).render())
        assert "3/3" in head, head  # what the operator reads: every trial, once
        # The journal: each trial once, all measured by this console, on its machine.
        trials = trial_lines(mine)
        assert sorted(int(t["index"]) for t in trials) == [1, 2, 3]  # type: ignore[call-overload]
        assert len({t["key"] for t in trials}) == 3
        assert {t["lane"] for t in trials} == {"console"}
        assert header(mine).get("machine") == demo.info.label  # the console's machine
        # The other sweep: its journal holds only its own lanes' trials, never the console's.
        assert all(t["lane"] != "console" for t in trial_lines(other))
        mine_ids = {r.id for r in demo.runs if r.sweep and r.sweep.sweep_id == sweep_id}
        assert all(t["run_id"] not in mine_ids for t in trial_lines(other))
