"""Issue 17's journeys through the real console at 80x24 (``vtc --demo``: the simulator),
each asserting what the operator reads: a weights OOM on one GPU through its fixes to a
served run; a hung server; a cancelled load; the board's baseline after a launch run and
two loads. Waits are on the session's state, bounded, never timing assertions."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from textual.command import CommandList
from textual.pilot import Pilot
from textual.widgets import Input, Static

from tui.domain.events import ServerState
from tui.domain.results import RunStatus
from tui.domain.telemetry import SourceStatus
from tui.modes import ConsoleOptions, build_session
from tui.session.facade import Session
from tui.ui.app import VtcApp, create_app
from tui.ui.widgets.metrics_panel import MetricsPanel
from tui.ui.widgets.run_card import RunCard

# slow tier: operator journeys: the console drives the simulator's server process in real time.
pytestmark = pytest.mark.slow

SIZE = (80, 24)


async def until(pilot: Pilot[None], done: Callable[[], bool], what: str) -> None:
    """Let the app run until ``done()`` holds; bounded (about 90 s), never a timing check."""
    for _ in range(900):
        if done():
            return
        await pilot.pause(0.1)
    raise AssertionError(f"gave up waiting for {what}")


def card_text(card: RunCard) -> str:
    return str(card.query_one(".card-body").render())


def card_of(app: VtcApp, label: str) -> str:
    for card in app.query(RunCard):
        text = card_text(card)
        if card.record.label == label:
            return text
    raise AssertionError(f"no card {label}")


def server_text(app: VtcApp) -> str:
    return str(app.main_screen.server_panel.query_one("#server-status", Static).render())


@pytest.fixture
async def demo(tmp_path: Path) -> AsyncIterator[Session]:
    options = ConsoleOptions(
        demo=True, sim_speed=50, data_dir=tmp_path, poll_interval_s=0.2, autostart=False
    )
    session = build_session(options)
    try:
        yield session
    finally:
        await session.close()  # the simulator a test started goes with it


def settled(session: Session) -> bool:
    return session.state in (ServerState.READY, ServerState.FAILED)


async def test_a_weights_oom_on_one_gpu_is_fixed_with_fp8_never_with_more_gpus(
    demo: Session,
) -> None:
    app = create_app(demo, clock=None)
    async with app.run_test(size=SIZE) as pilot:
        form = app.main_screen.form
        form.field("quantization").set_value("")  # 16 GB of weights on a 10 GB card
        await pilot.pause()
        await pilot.press("r")
        await until(pilot, lambda: demo.state is ServerState.FAILED, "the weights OOM")
        await pilot.pause()
        failed = demo.runs[-1]
        assert failed.diagnosis is not None and failed.diagnosis.kind == "weights_oom"
        text = card_of(app, failed.label)
        assert "fix 1: Quantize the weights to fp8" in text
        assert "GPUs" not in text.split("fix 1:")[1]  # no "split over 2 GPUs" on one GPU
        assert all("tensor_parallel_size" not in fix.set for fix in failed.diagnosis.fixes)
        assert "f applies fix 1 and restarts" in text  # f's own choice: the next untried fix
        await pilot.press("f")
        await pilot.pause()
        assert form.field("quantization").value == "fp8"
        await until(pilot, lambda: len(demo.runs) == 2 and settled(demo), "the fixed start")
        assert demo.state is ServerState.READY
        await until(pilot, lambda: "READY" in server_text(app), "the panel's READY")


async def test_a_hung_server_reads_not_responding_and_s_still_stops_it(demo: Session) -> None:
    app = create_app(demo, clock=None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r")
        await until(pilot, lambda: settled(demo), "the start")
        assert demo.state is ServerState.READY and demo.pid is not None
        pid = demo.pid
        os.killpg(pid, signal.SIGSTOP)  # alive, answering nothing
        try:
            await until(pilot, lambda: "NOT RESPONDING" in server_text(app), "the hung state")
            text = server_text(app)
            assert "READY" not in text and "silent" in text and "s stops it" in text
            app.main_screen.board.focus()
            await pilot.press("s")
            await until(pilot, lambda: demo.state is ServerState.STOPPED, "the stop")
            await until(pilot, lambda: "STOPPED" in server_text(app), "the panel's STOPPED")
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGCONT)


async def test_a_cancelled_load_is_marked_on_its_card_and_never_the_baseline(
    demo: Session,
) -> None:
    app = create_app(demo, clock=None)
    async with app.run_test(size=SIZE) as pilot:
        form = app.main_screen.form
        form.field("load-num_prompts").set_value("2000")
        form.field("load-max_concurrency").set_value("2")
        await pilot.pause()
        await pilot.press("r")
        await until(pilot, lambda: settled(demo), "the start")
        app.main_screen.board.focus()
        await pilot.press("b")
        await until(pilot, lambda: demo.load_running, "the load running")
        await pilot.press("c")
        run = demo.runs[-1]
        await until(
            pilot,
            lambda: demo.current is not None and demo.current.bench is not None,
            "the cancelled load's result",
        )
        await pilot.pause()
        assert demo.current is not None and demo.current.bench is not None
        assert demo.current.bench.cancelled
        assert "LOAD CANCELLED" in card_of(app, run.label)
        assert "the board's baseline" not in card_of(app, run.label)
        board = app.main_screen.board.board
        assert board is not None and board.baseline is None
        assert "no completed load yet" in board.header()


async def test_the_baseline_after_a_launch_run_and_two_loads_is_the_first_load(
    demo: Session,
) -> None:
    app = create_app(demo, clock=None)
    async with app.run_test(size=SIZE) as pilot:
        form = app.main_screen.form
        form.field("load-num_prompts").set_value("8")
        await pilot.pause()
        await pilot.press("r")  # the launch run: served, never loaded
        await until(pilot, lambda: settled(demo), "the launch run")
        for seqs in ("64", "32"):
            form.field("max_num_seqs").set_value(seqs)
            await pilot.pause()
            app.main_screen.board.focus()
            count = len(demo.runs)
            await pilot.press("r")
            await until(pilot, lambda n=count: len(demo.runs) > n and settled(demo), "a start")  # type: ignore[misc]
            await pilot.press("b")
            await until(
                pilot,
                lambda: demo.current is not None and demo.current.bench is not None,
                "a load",
            )
        await pilot.pause()
        launch, first, second = demo.runs[-3:]
        assert launch.bench is None and launch.status is RunStatus.REPLACED
        board = app.main_screen.board.board
        assert board is not None and board.baseline is not None
        assert board.baseline.run.id == first.id  # the newest run reads as the change
        assert f"vs {first.label} (first load)" in board.header()
        assert "the board's baseline" in card_of(app, first.label)
        text = card_of(app, second.label)
        assert "max_num_seqs 64 -> 32" in text and "%" in text  # compared: a delta, not
        assert "other load" not in text  # "(other load)"


def metrics_text(app: VtcApp) -> str:
    return str(app.main_screen.query_one(MetricsPanel).render())


async def test_a_restart_from_a_preempting_to_a_calm_configuration_drops_the_advice(
    demo: Session,
) -> None:
    """Issue 17: after the restart the Metrics panel still advised ``max_num_seqs=...
    · 30 preemptions in the last 59 s`` from the previous server."""
    app = create_app(demo, clock=None)
    async with app.run_test(size=SIZE) as pilot:
        form = app.main_screen.form
        load = {
            "input_len": "128",
            "output_len": "200",
            "num_prompts": "32",
            "max_concurrency": "32",
        }
        for name, value in load.items():
            form.field(f"load-{name}").set_value(value)
        await pilot.pause()
        await pilot.press("r")
        await until(pilot, lambda: settled(demo), "the start")
        app.main_screen.board.focus()
        await pilot.press("b")  # 32 streams of 328 tokens on ~2,300 tokens of KV: preemption
        panel = app.main_screen.query_one(MetricsPanel)
        await until(pilot, lambda: any(a.code == "preemptions" for a in panel.advice), "the advice")
        # at 80 columns: ``a: max_num_seqs=N ...`` whole, once the panel has drawn it (a busy
        # machine may take more than one pause between the advice and its line)
        await until(pilot, lambda: "a: " in metrics_text(app), "the advice's line")
        await until(
            pilot,
            lambda: demo.current is not None and demo.current.bench is not None,
            "the load's end",
        )
        form.field("max_num_seqs").set_value("4")
        await pilot.pause()
        app.main_screen.board.focus()
        count = len(demo.runs)
        await pilot.press("r")
        await until(pilot, lambda: len(demo.runs) > count and settled(demo), "the calm start")
        assert demo.state is ServerState.READY
        ready_at = time.monotonic()

        def read_since(t: float) -> bool:
            m = panel.metrics
            return m is not None and m.status is SourceStatus.OK and m.t > t

        # readings of the new server, well within the old one's minute of samples
        await until(pilot, lambda: read_since(ready_at), "the new server's page")
        later = time.monotonic() + 1.0
        await until(pilot, lambda: read_since(later), "more of its readings")
        assert "preempting" not in metrics_text(app) and "max_num_seqs=" not in metrics_text(app)
        assert not any(a.code == "preemptions" for a in panel.advice)


async def test_seed_000_by_the_palette_at_80x24_failure_fix_and_load(demo: Session) -> None:
    """Seed 000 as an operator types it at 80x24 against the simulator: ctrl+p ``mml``,
    30576, F5; the failure card says why and what ``f`` does; F7 takes the fix; F6 loads;
    the load's card reads READY with its numbers and is the board's baseline."""
    app = create_app(demo, clock=None)
    async with app.run_test(size=SIZE) as pilot:
        app.main_screen.form.field("load-num_prompts").set_value("8")
        await pilot.press("ctrl+p", *"mml")
        palette = app.screen
        hits = palette.query_one(CommandList)
        await until(
            pilot,
            lambda: (
                hits.option_count > 0 and "max-model-len" in str(hits.get_option_at_index(0).prompt)
            ),
            "the palette's hit",
        )
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.focused, Input), "the field's focus")
        field = app.focused
        assert isinstance(field, Input) and field.id == "in-max_model_len"
        await pilot.press(*"30576", "f5")
        await until(pilot, lambda: demo.state is ServerState.FAILED, "the failed start")
        await pilot.pause()
        failed = demo.runs[-1]
        assert failed.diagnosis is not None and failed.diagnosis.kind == "kv_cache_too_small"
        text = card_of(app, failed.label)
        assert "FAILED" in text and "fix 1:" in text and "f applies fix 1" in text
        fixed = failed.diagnosis.fixes[0].set["max_model_len"]
        await pilot.press("f7")
        await until(pilot, lambda: len(demo.runs) == 2 and settled(demo), "the fixed start")
        assert demo.state is ServerState.READY
        assert app.main_screen.form.field("max_model_len").value == str(fixed)
        await pilot.press("f6")
        await until(
            pilot,
            lambda: demo.current is not None and demo.current.bench is not None,
            "the load's result",
        )
        await pilot.pause()
        served = demo.runs[-1]
        text = card_of(app, served.label)
        assert "READY" in text and "out tok/s" in text and "the board's baseline" in text
        assert f"max_model_len {fixed} -> 30576" in card_of(app, failed.label)
