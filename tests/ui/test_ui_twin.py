"""The twin in the console at 80x24 (``vtc --demo --sim-profile``; issue 20, item 4).

The demo simulates a calibrated server (its profile), and the console's twin is that
profile: the form shows what the edited flags would do, marked predicted with the profile
and its error; a load's card carries the prediction made before it ran; ``k`` calibrates
the ready server with a progress bar and an ETA under the form, then says what it saved.
Waits are on what the operator reads, bounded, never on time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from fakes.profiles import cpu_profile
from fakes.runs import served_run
from textual.pilot import Pilot
from ui_fakes import FakeSession, FakeTwin, NoteLog

from tui.domain.calibration import Progress
from tui.domain.events import ServerState
from tui.domain.prediction import Prediction
from tui.modes import ConsoleOptions, build_session
from tui.session.facade import Session
from tui.store.profiles import list_profiles, save_profile
from tui.ui.app import VtcApp, create_app
from tui.ui.twin_controller import profile_name
from tui.ui.widgets.run_card import RunCard
from tui.ui.widgets.twin_line import TwinLine

SIZE = (80, 24)


async def until(pilot: Pilot[None], done: Callable[[], bool], what: str) -> None:
    """Let the app run until ``done()`` holds; bounded (about 120 s), never a timing check."""
    for _ in range(1200):
        if done():
            return
        await pilot.pause(0.1)
    raise AssertionError(f"gave up waiting for {what}")


def twin_text(app: VtcApp) -> str:
    line = app.main_screen.query_one(TwinLine)
    return str(line.render()) if line.display else ""


@pytest.fixture
async def twin_demo(tmp_path: Path) -> AsyncIterator[Session]:
    profile = save_profile(cpu_profile(tmp_path / "model"), tmp_path)
    options = ConsoleOptions(
        demo=True,
        sim_speed=50,
        data_dir=tmp_path,
        poll_interval_s=0.2,
        autostart=False,
        sim_profile=profile.name,
        # k's calibration: its design's every family, few requests each, one pass: the
        # least that still measures, fits and validates (the property: progress, an ETA, a
        # profile saved that becomes the twin).
        calibration_scale=0.2,
        calibration_passes=1,
        serve_args=[
            "serve",
            profile.flags.model,
            "--kv-cache-memory-bytes",
            "64M",
            "--enforce-eager",
        ],
    )
    session = build_session(options)
    try:
        yield session
    finally:
        await session.close()


async def test_the_form_says_what_the_twin_predicts_for_the_edited_flags(
    twin_demo: Session,
) -> None:
    app = create_app(twin_demo, clock=None)
    async with app.run_test(size=SIZE) as pilot:
        form = app.main_screen.form
        form.field("max_num_seqs").set_value("8")
        label = "predicted (twin tiny-cpu r1, ±5% validation)"
        await until(pilot, lambda: label in twin_text(app), "the twin's line")
        assert "starts, KV 131,072 tok" in twin_text(app)
        assert "tok/s" in twin_text(app) and "p99 TTFT" in twin_text(app)
        form.field("kv_cache_memory_bytes").set_value("1M")
        await until(pilot, lambda: "will NOT start" in twin_text(app), "the refusal")
        assert "max seq len (4096)" in twin_text(app)


@pytest.mark.slow  # a whole calibration (designed loads on the simulator, then the fit)
async def test_a_load_carries_the_twins_prediction_and_k_calibrates_the_server(
    twin_demo: Session, tmp_path: Path
) -> None:
    app = create_app(twin_demo, clock=None)
    async with app.run_test(size=SIZE) as pilot:
        notes = NoteLog(app)
        form = app.main_screen.form
        form.field("load-num_prompts").set_value("24")
        form.field("load-max_concurrency").set_value("8")
        await pilot.pause()
        await pilot.press("r")
        await until(pilot, lambda: twin_demo.state is ServerState.READY, "the start")
        app.main_screen.board.focus()
        await pilot.press("b")
        await until(
            pilot,
            lambda: twin_demo.current is not None and twin_demo.current.bench is not None,
            "the load's result",
        )
        run = twin_demo.current
        assert run is not None and run.prediction is not None
        assert run.prediction.label() == "predicted (twin tiny-cpu r1, ±5% validation)"
        await pilot.pause()
        cards = [str(c.query_one(".card-body").render()) for c in app.query(RunCard)]
        assert any("predicted (twin tiny-cpu r1, ±5% validation)" in text for text in cards)

        progress: list[str] = []
        await pilot.press("k")
        await until(
            pilot,
            lambda: progress.append(twin_text(app)) or "Calibrated" in notes.text(),
            "the calibration",
        )
        assert any(p.startswith("calibrating twin-model: [") and "left" in p for p in progress if p)
        assert "twin twin-model r1 saved" in notes.text()
        assert "twin-model" in {p.name for p in list_profiles(tmp_path)}


# -- the same at 80x24 over the fake session (no simulator): the line and k's progress --------
def _fake_prediction(**kw: object) -> Prediction:
    base: dict[str, object] = {
        "profile": "gpu-box r3",
        "error_pct": 6.0,
        "error_source": "validation",
        "starts": True,
        "kv_tokens": 448928,
        "output_throughput": 2345.0,
        "p99_ttft_ms": 120.0,
        "mean_e2el_ms": 2000.0,
        "p99_e2el_ms": 2100.0,
    }
    return Prediction.model_validate({**base, **kw})


async def test_the_twin_line_fits_80x24_and_k_shows_progress_then_what_was_saved() -> None:
    session = FakeSession(state=ServerState.READY, runs=[served_run(1)])
    session.twin = FakeTwin(_fake_prediction())
    app = create_app(session)  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        notes = NoteLog(app)
        app.main_screen.form.field("max_num_seqs").set_value("64")
        twin = session.twin
        # The edited flags are predicted, before any restart.
        edited = lambda: any(f.max_num_seqs == 64 for f, _ in twin.predicted)  # noqa: E731
        await until(pilot, lambda: edited() and "gpu-box r3" in twin_text(app), "the twin's line")
        shown = "predicted (twin gpu-box r3, ±6% validation): starts, KV 448,928"
        assert twin_text(app).startswith(shown)
        app.main_screen.board.focus()
        await pilot.press("k")
        await until(pilot, lambda: session.twin is not None and session.twin.calibrating, "k")
        await session.twin.steps.put(Progress(3, 8, "decode-c16", 62.0, 40.0, 240.0))
        await until(pilot, lambda: "3/8 decode-c16" in twin_text(app), "the progress")
        assert "~0:40 left (budget 4:00)" in twin_text(app)
        assert app.main_screen.query_one(TwinLine).region.width <= 80
        await session.twin.steps.put(None)
        await until(pilot, lambda: "Calibrated" in notes.text(), "the end")
        assert "saved: validation error ±6%" in notes.text()
        model = session.current.flags.model if session.current else ""
        assert session.twin.calibrated == [profile_name(model)]


async def test_a_command_the_twin_says_will_not_start_is_said_so() -> None:
    session = FakeSession()
    session.twin = FakeTwin(_fake_prediction(starts=False, failure="No available memory."))
    app = create_app(session)  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        app.main_screen.form.field("max_num_seqs").set_value("8")
        await until(pilot, lambda: "will NOT start" in twin_text(app), "the refusal")
        assert twin_text(app).endswith("will NOT start: No available memory.")
        line = app.main_screen.query_one(TwinLine)
        assert line.has_class("-missed")
