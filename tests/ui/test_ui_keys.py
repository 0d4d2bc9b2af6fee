"""Pilot tests: what each key asks of the session, and what it refuses to ask."""

from __future__ import annotations

import asyncio
import signal

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Select
from ui_fakes import (
    FIXED_TIME,
    MODEL,
    FakeSession,
    NoteLog,
    board_runs,
    help_lines,
    kv_failure,
    presets,
)

from tui.domain.diagnosis import Fix
from tui.domain.events import ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import RunRecord, RunStatus
from tui.domain.workload import LoadSpec
from tui.ui.app import VtcApp, create_app
from tui.ui.widgets.flag_form import FlagForm


def make(session: FakeSession) -> tuple[VtcApp, NoteLog]:
    app = create_app(session, clock=None)
    return app, NoteLog(app)


def form(app: VtcApp) -> FlagForm:
    return app.main_screen.form


async def settle(pilot: Pilot[None]) -> None:
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def test_r_with_an_invalid_field_restarts_nothing_and_focuses_the_field() -> None:
    session = FakeSession()
    app, notes = make(session)
    async with app.run_test(size=(80, 24)) as pilot:
        form(app).field("gpu_memory_utilization").set_value("1.5")
        form(app).field("max_num_seqs").set_value("many")
        await pilot.pause()
        await pilot.press("r")
        await settle(pilot)
        assert session.restarted_with == []
        assert app.focused is not None
        # the first problem is the type error (validate_form reports those first)
        assert app.focused.id == "in-max_num_seqs"
        row = form(app).field("max_num_seqs")
        assert row.has_class("-invalid")
        assert "invalid int value: 'many'" in str(row.query_one(".field-error").render())
        assert "Not restarted" in notes.text()


async def test_range_errors_and_preflight_warnings_show_live_in_the_form() -> None:
    session = FakeSession(warnings=["KV estimate: 1136 tokens fit, max_model_len is 30576"])
    app, _ = make(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()  # pre-flight runs in a worker, off the loop
        await pilot.pause()  # and the form lays out its warnings
        box = app.query_one("#preflight")
        under = form(app).field("max_model_len").query(".field-warning")
        # under the field it names, not form-wide above the field being edited
        assert not box.display and under and "1136 tokens fit" in str(under.first().render())
        assert session.preflighted  # asked about the form's flags
        await pilot.click("#in-gpu_memory_utilization")
        await pilot.press("1", ".", "5")
        await app.workers.wait_for_complete()
        await pilot.pause()
        row = form(app).field("gpu_memory_utilization")
        assert row.has_class("-invalid")
        assert "less than or equal to 1" in str(row.query_one(".field-error").render())
        assert not under.first().display  # no pre-flight for flags that cannot launch
        await pilot.press("backspace", "backspace")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not row.has_class("-invalid")
        assert under.first().display and not box.display


async def test_r_with_a_valid_form_restarts_with_exactly_the_forms_flags() -> None:
    session = FakeSession(initial_flags=ServeFlags(model=MODEL, max_model_len=400))
    app, _ = make(session)
    async with app.run_test(size=(80, 24)) as pilot:
        f = form(app)
        f.field("max_model_len").set_value("512")
        f.field("quantization").set_value("fp8")
        f.field("enable_prefix_caching").set_value("off")
        f.field("max_num_batched_tokens").set_value("8k")
        f.field("extra_args").set_value("--seed 7")
        await pilot.pause()
        await pilot.press("r")
        await settle(pilot)
    assert session.restarted_with == [
        ServeFlags(
            model=MODEL,
            max_model_len=512,
            quantization="fp8",
            enable_prefix_caching=False,
            max_num_batched_tokens=8000,
            extra_args=("--seed", "7"),
        )
    ]


async def test_letters_type_into_a_field_and_f5_restarts_from_inside_it() -> None:
    session = FakeSession()
    app, _ = make(session)
    async with app.run_test(size=(80, 24)) as pilot:
        form(app).focus_field("served_model_name")
        await pilot.pause()
        await pilot.press("r", "b", "q")
        await settle(pilot)
        assert app.query_one("#in-served_model_name", Input).value == "rbq"
        assert session.calls == ["start"]  # nothing but the session start
        await pilot.press("f5")
        await settle(pilot)
        assert [f.served_model_name for f in session.restarted_with] == ["rbq"]
        await pilot.press("escape")
        assert app.main_screen.board.has_focus_within


async def test_b_runs_the_load_only_when_the_server_is_ready_and_the_workload_valid() -> None:
    session = FakeSession(state=ServerState.STARTING, initial_load=LoadSpec(num_prompts=64))
    app, notes = make(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("b")
        await settle(pilot)
        assert session.loads == []
        assert "server is starting" in notes.text()

        session.state = ServerState.READY
        form(app).field("load-num_prompts").set_value("0")
        await pilot.pause()
        await pilot.press("b")
        await settle(pilot)
        assert session.loads == []
        assert app.focused is not None and app.focused.id == "in-load-num_prompts"

        form(app).field("load-num_prompts").set_value("10")
        form(app).field("load-max_concurrency").set_value("")
        await pilot.pause()
        await pilot.press("f6")  # b's F-key: focus is still in the field
        await settle(pilot)
    assert session.loads == [LoadSpec(num_prompts=10, max_concurrency=None)]


async def test_the_environment_field_is_validated_and_a_secret_is_never_shown() -> None:
    # issue 19: the run's environment is edited in the form like its flags
    session = FakeSession(initial_flags=ServeFlags(model=MODEL))
    app, notes = make(session)
    secret = "hf_never_on_screen_42"
    async with app.run_test(size=(80, 24)) as pilot:
        row = form(app).field("env")
        row.set_value(f"HF_TOKEN={secret} VLLM_USE_V2_MODEL_RUNNER=no")
        await pilot.pause()
        await pilot.press("r")
        await settle(pilot)
        assert session.restarted_with == [] and row.has_class("-invalid")
        error = str(row.query_one(".field-error").render())
        assert "HF_TOKEN holds a secret" in error and "vtc's own environment" in error
        assert "invalid literal for int() with base 10: 'no'" in error
        assert secret not in error and secret not in notes.text()
        assert app.focused is not None and app.focused.id == "in-env"  # the field to fix
        row.set_value("VLLM_USE_V2_MODEL_RUNNER=0")
        await pilot.pause()
        await pilot.press("f5")  # restart from inside the field (letters are text there)
        await settle(pilot)
    wanted = ServeFlags(model=MODEL, env={"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert session.restarted_with == [wanted]


async def test_f_applies_the_latest_fix_to_the_form_and_restarts_with_it() -> None:
    runs = board_runs()[:2]  # a ready baseline, then a failed start
    session = FakeSession(runs=runs, initial_flags=runs[1].flags)
    app, notes = make(session)
    async with app.run_test(size=(120, 40)) as pilot:
        assert form(app).field("max_model_len").value == "30576"
        await pilot.press("f")
        await settle(pilot)
        assert form(app).field("max_model_len").value == "1136"
        assert "Lower max_model_len to 1136" in notes.text()
    # One key: the form is edited and the server restarted with exactly that form.
    assert len(session.restarted_with) == 1
    assert session.restarted_with[0].max_model_len == 1136


async def test_keys_with_nothing_to_act_on_say_why_and_s_stops_the_server() -> None:
    session = FakeSession(runs=board_runs()[:1], state=ServerState.READY)
    app, notes = make(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f", "c")
        await settle(pilot)
        assert "No failed run" in notes.text()
        assert "No load is running" in notes.text()
        assert "cancel_load" not in session.calls
        await pilot.press("s")
        await settle(pilot)
    assert "stop_server" in session.calls


async def test_attached_sessions_offer_no_restart_fix_or_stop() -> None:
    session = FakeSession(can_restart=False, mode_label="attached: http://gpu-box:8000")
    app, _ = make(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        offered = {b.binding.action for b in app.screen.active_bindings.values()}
        assert not offered & {"restart", "fix", "stop_server", "sweep", "repeat", "load_run"}
        assert {"bench", "cancel_load", "help"} <= offered
        await pilot.press("r", "s", "f", "f5", "f9")
        await settle(pilot)
    assert session.restarted_with == []
    assert "stop_server" not in session.calls


@pytest.mark.parametrize(
    ("how", "ends_with"), [("q", "close"), ("SIGTERM", "close"), ("SIGHUP", "detach")]
)
async def test_q_sigterm_close_and_a_hangup_detaches(how: str, ends_with: str) -> None:
    """q and SIGTERM stop what the console started; the terminal going away (SSH dropped,
    tmux pane killed) detaches, leaving the server for the next vtc."""
    session = FakeSession()
    app, _ = make(session)

    async def leave(pilot: Pilot[None]) -> None:
        await pilot.pause()
        if how == "q":
            # simulate_key, not pilot.press: press then waits on a screen that leaves with the app
            app.simulate_key("q")
        else:
            app.on_signal(signal.Signals[how])

    # run_async returns only once the app has exited: the key or the signal must get it there.
    await asyncio.wait_for(
        app.run_async(headless=True, size=(80, 24), auto_pilot=leave), timeout=30
    )
    assert session.calls[-1] == ends_with
    assert ("close" in session.calls) is (ends_with == "close")
    assert app.return_code == 0


async def test_startup_notices_are_shown_once_the_session_started() -> None:
    session = FakeSession()
    session.notices = ["Reattached to the server vtc started earlier: pid 42 at http://h:8000."]
    app, notes = make(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
    assert session.calls[0] == "start"
    assert "Reattached to the server vtc started earlier: pid 42" in notes.text()


async def test_help_lists_every_key_and_closes_with_escape() -> None:
    session = FakeSession()
    app, _ = make(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        keys = [line[:10].strip() for line in help_lines(app)]  # the key column
        for key in ("r / F5", "b / F6", "f / F7", "c / F8", "s / F9", "? / F1", "Esc"):
            assert key in keys
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.main_screen


async def test_a_preset_loads_its_flags_and_workload() -> None:
    session = FakeSession(presets=presets())
    app, _ = make(session)
    async with app.run_test(size=(120, 40)) as pilot:
        app.query_one("#preset", Select).value = 0  # the first preset
        await settle(pilot)
        f = form(app)
        assert f.field("max_model_len").value == "512"
        assert f.field("kv_cache_dtype").value == ""
        assert f.field("dtype").value == "float16"
        assert f.field("load-input_len").value == "200"
        flags, problems = f.validate_flags()
        assert problems == []
        assert flags == presets()[0].flags


async def test_f_stops_when_its_fix_failed_the_same_way() -> None:
    """``f`` never loops: after a fix that failed with the same cause it says so, once."""
    base = ServeFlags(model=MODEL, max_model_len=30576)
    fix = Fix(title="Raise gpu_memory_utilization to 0.95", set={"gpu_memory_utilization": 0.95})
    first = RunRecord(
        id=1,
        label="#1",
        created_at=FIXED_TIME,
        flags=base,
        status=RunStatus.FAILED,
        diagnosis=kv_failure().model_copy(update={"fixes": [fix]}),
    )
    again = RunRecord(
        id=2,
        label="#2",
        created_at=FIXED_TIME,
        flags=base.replace(gpu_memory_utilization=0.95),
        status=RunStatus.FAILED,
        diagnosis=kv_failure(),
    )
    session = FakeSession(runs=[first, again], initial_flags=again.flags)
    app, notes = make(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f")
        await settle(pilot)
        assert "restart" not in session.calls  # nothing applied, nothing restarted
        assert "failed the same way" in notes.text()
