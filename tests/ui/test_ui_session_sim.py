"""The console over the real services: ``build_session`` (as ``vtc --demo``) and the simulator.

Seed 000's first hour, by keys only: a start that fails on KV capacity, ``f`` to take the
diagnosed fix, ``r`` to restart, ``b`` to load the ready server; every step on the board.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot

from tui.domain.events import ServerState
from tui.domain.results import RunStatus
from tui.modes import ConsoleOptions, build_session
from tui.session import wait_for_state
from tui.ui.app import create_app
from tui.ui.widgets.run_card import RunCard

# slow tier: the console drives the simulator's server process in real time.
pytestmark = pytest.mark.slow


async def until(pilot: Pilot[None], done: Callable[[], bool], what: str) -> None:
    """Let the app run until ``done()`` holds; bounded (about 60 s), never a timing assertion."""
    for _ in range(600):
        if done():
            return
        await pilot.pause(0.1)
    raise AssertionError(f"gave up waiting for {what}")


def card_text(card: RunCard) -> str:
    return str(card.query_one(".card-body").render())


async def test_seed_000_story_through_the_console(tmp_path: Path) -> None:
    options = ConsoleOptions(
        demo=True, sim_speed=50, data_dir=tmp_path, poll_interval_s=0.2, autostart=False
    )
    session = build_session(options)
    app = create_app(session, clock=None)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            form = app.main_screen.form
            form.field("max_model_len").set_value("30576")
            form.field("load-num_prompts").set_value("8")
            await pilot.pause()
            await pilot.press("r")
            await until(pilot, lambda: session.state is ServerState.FAILED, "the failed start")
            await pilot.pause()
            failed = session.runs[-1]
            assert failed.status is RunStatus.FAILED and failed.diagnosis is not None
            assert "FAILED" in card_text(list(app.query(RunCard))[-1])

            await pilot.press("f")  # one key: the fix goes into the form and restarts
            await pilot.pause()
            fixed_len = failed.diagnosis.fixes[0].set["max_model_len"]
            assert form.field("max_model_len").value == str(fixed_len)
            await until(pilot, lambda: session.state is ServerState.READY, "the fixed start")
            await pilot.press("b")
            await until(
                pilot,
                lambda: session.current is not None and session.current.bench is not None,
                "the load result",
            )
            await pilot.pause()
            cards = list(app.query(RunCard))
            assert len(cards) == 2
            text = card_text(cards[-1])
            assert "READY" in text and "out tok/s" in text
            # the fixed run is this session's first served run: the baseline the failed
            # start's card is compared with
            assert "the board's baseline" in text
            assert f"max_model_len {fixed_len} -> 30576" in card_text(cards[0])
            assert session.current is not None and session.current.bench is not None
            assert session.current.bench.completed == 8
    finally:
        await session.close()  # the simulator this test started goes with it


async def test_seed_000_every_offered_fix_starts_or_is_not_offered(tmp_path: Path) -> None:
    """The KV case's fix loop is gone: each fix passed pre-flight, and each one starts."""
    options = ConsoleOptions(
        demo=True, sim_speed=50, data_dir=tmp_path, poll_interval_s=0.2, autostart=False
    )
    session = build_session(options)
    await session.start()
    try:
        await session.restart(session.info.initial_flags.replace(max_model_len=30576))
        assert await wait_for_state(session, {ServerState.READY, ServerState.FAILED}, 60) is (
            ServerState.FAILED
        )
        failed = session.runs[-1]
        assert failed.diagnosis is not None and failed.diagnosis.kind == "kv_cache_too_small"
        fixes = failed.diagnosis.fixes
        assert fixes and all(fix.check == "passed" for fix in fixes)  # checked, not guessed
        for fix in fixes:  # a fix that would not fit next to the weights is not offered
            await session.restart(failed.flags.replace(**fix.set))
            state = await wait_for_state(session, {ServerState.READY, ServerState.FAILED}, 60)
            assert state is ServerState.READY, f"{fix.title} did not start"
    finally:
        await session.close()


# -- issue 19: an environment variable is a fix too (WSL2: "UVA is not available"), at 80x24
RUNNER = "VLLM_USE_V2_MODEL_RUNNER"


async def test_f_applies_an_environment_fix_and_the_run_serves(tmp_path: Path) -> None:
    options = ConsoleOptions(
        demo=True,
        sim_speed=50,
        sim_host="wsl2",
        data_dir=tmp_path,
        poll_interval_s=0.2,
        autostart=False,
    )
    session = build_session(options)
    app = create_app(session, clock=None)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            form = app.main_screen.form
            assert form.field("env").value == ""
            form.field("load-num_prompts").set_value("4")
            await pilot.pause()
            await pilot.press("r")
            await until(pilot, lambda: session.state is ServerState.FAILED, "the failed start")
            await pilot.pause()
            failed = session.runs[-1]
            assert failed.diagnosis is not None
            assert failed.diagnosis.kind == "model_runner_unsupported"
            text = card_text(list(app.query(RunCard))[-1])
            assert "FAILED" in text and "UVA is not available" in text

            await pilot.press("f")  # the variable goes into the run's environment; restart
            await pilot.pause()
            assert form.field("env").value == f"{RUNNER}=0"
            await until(pilot, lambda: session.state is ServerState.READY, "the fixed start")
            await pilot.pause()
            served = session.current
            assert served is not None and served.status is RunStatus.READY
            assert served.flags.environment == {RUNNER: "0"}
            cards = list(app.query(RunCard))
            assert len(cards) == 2 and "READY" in card_text(cards[-1])
            assert f"{RUNNER}=0" in card_text(cards[-1])  # the served run's own settings
            await pilot.press("b")  # a load makes the served run the board's baseline
            await until(
                pilot,
                lambda: session.current is not None and session.current.bench is not None,
                "the load result",
            )
            await pilot.pause()
            # the failed start's card reads the difference against that baseline
            assert f"env {RUNNER}=0 -> none" in card_text(app.query(RunCard).first())
    finally:
        await session.close()
