"""Pilot tests: the form's "More vLLM flags" search and the cards' KV estimate."""

from __future__ import annotations

from textual.widgets import Input, OptionList, Static
from ui_fakes import FIXED_TIME, MODEL, FakeSession, fixture_cli

from tui.domain.flags.serve import LAUNCH_HOST, ServeFlags
from tui.domain.flags.vllm_tables import table_for
from tui.domain.results import RunRecord, RunStatus, StartupProfile
from tui.modes.demo import NO_FLAG_LIST as DEMO_REASON
from tui.ui.app import create_app
from tui.ui.widgets.flag_search import LOADING_REASON, FlagSearch
from tui.ui.widgets.run_card import RunCard

REAL = "vllm: /usr/bin/vllm"  # a real session's mode label: the flag list loads after start


def note(app: object) -> str:
    return str(app.query_one("#flag-search-note", Static).render())  # type: ignore[attr-defined]


async def test_search_lists_only_flags_the_form_does_not_declare() -> None:
    session = FakeSession(mode_label=REAL, vllm_cli=fixture_cli())
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        search = app.query_one(FlagSearch)
        assert "more flags of vLLM" in note(app)
        app.query_one("#flag-search", Input).focus()  # Tab reaches it too (below the flags)
        await pilot.pause()
        await pilot.press(*"log")
        await pilot.pause()
        names = [f.name for f in search.matches]
        # --max-logprobs matches too, but the form declares it
        assert names == ["--disable-log-stats", "--enable-log-requests"]
        options = app.query_one("#flag-matches", OptionList)
        assert options.display and options.option_count == 2
        first = str(options.get_option_at_index(0).prompt)
        assert "--disable-log-stats" in first and "Disable logging statistics." in first


async def test_enter_appends_the_flag_to_extra_args_and_focuses_them() -> None:
    session = FakeSession(
        mode_label=REAL,
        vllm_cli=fixture_cli(),
        initial_flags=ServeFlags(model=MODEL, extra_args=("--optimization-level", "2")),
    )
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        form = app.main_screen.form
        app.query_one("#flag-search", Input).focus()  # Tab reaches it too (below the flags)
        await pilot.pause()
        await pilot.press(*"scheduled", "enter")
        await pilot.pause()
        extra = form.field("extra_args")
        assert extra.value == "--optimization-level 2 --max-num-scheduled-tokens "
        assert app.focused is extra.editor
        assert isinstance(app.focused, Input)
        assert app.focused.cursor_position == len(extra.value)
        await pilot.press(*"2048")
        await pilot.pause()
        # a boolean goes in bare, picked from the list itself
        app.query_one("#flag-search", Input).value = "headless"
        await pilot.pause()
        options = app.query_one("#flag-matches", OptionList)
        options.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert extra.value == "--optimization-level 2 --max-num-scheduled-tokens 2048 --headless"
        flags, problems = form.validate_flags()
    assert problems == []
    assert flags is not None
    assert flags.extra_args == (
        "--optimization-level",
        "2",
        "--max-num-scheduled-tokens",
        "2048",
        "--headless",
    )


async def test_without_a_flag_list_the_section_says_why_and_picks_it_up_later() -> None:
    demo = FakeSession()  # demo label, no list
    app = create_app(demo, clock=None)
    async with app.run_test(size=(80, 24)):
        assert note(app).startswith(DEMO_REASON)
        assert "extra args: vLLM 0.33.0's table" in note(app)  # which table is in force
        assert not app.query_one("#flag-matches", OptionList).display

    session = FakeSession(mode_label=REAL)
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        assert note(app) == LOADING_REASON
        session.vllm_cli = fixture_cli()  # the session finished loading it
        app.query_one("#flag-search", Input).focus()  # focus looks again, before the timer
        await pilot.pause()
        assert "more flags of vLLM" in note(app)

    failed = FakeSession(mode_label=REAL)
    failed.vllm_cli_error = "vllm's python could not import vllm"
    app = create_app(failed, clock=None)
    async with app.run_test(size=(80, 24)):
        assert "could not import vllm" in note(app)


def card_run(estimate: int, logged: int | None) -> RunRecord:
    return RunRecord(
        id=1,
        created_at=FIXED_TIME,
        label="#1",
        flags=ServeFlags(model=MODEL),
        status=RunStatus.READY if logged else RunStatus.STARTING,
        startup=StartupProfile(kv_cache_tokens=logged, kv_estimate_tokens=estimate),
    )


async def test_a_card_shows_the_kv_estimate_and_its_error() -> None:
    session = FakeSession(runs=[card_run(2300, None)])
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        body = app.query_one(RunCard).query_one(".card-body", Static)
        assert "KV est 2,300" in str(body.render())
        session.update_run(card_run(2300, 2000))
        await pilot.pause()
        lines = str(body.render()).splitlines()
        assert "KV 2,000 (est 2,300, +15.0%)" in lines
        assert all(len(line) <= 30 for line in lines)


async def test_extra_args_are_checked_against_the_installed_vllms_own_flags() -> None:
    """An option vLLM 0.32 knows but the installed vLLM does not is refused in the form."""
    # The fixture is a part of vLLM 0.32's parser: --speculative-config is not in it.
    session = FakeSession(mode_label=REAL, vllm_cli=fixture_cli())
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        form = app.main_screen.form
        form.field("extra_args").set_value("--speculative-config {}")
        await pilot.pause()
        flags, problems = form.validate_flags()
        assert flags is None
        assert [p.field for p in problems] == ["extra_args"]
        assert "--speculative-config" in problems[0].message
        # Without the installed list the form judges by vLLM 0.32's table, which knows it.
        session.vllm_cli = None
        flags, problems = form.validate_flags()
        assert flags is not None and problems == []


async def test_the_host_field_shows_where_vtc_binds_when_it_is_blank() -> None:
    session = FakeSession(mode_label=REAL)
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)):
        editor = app.main_screen.form.field("host").editor
        assert isinstance(editor, Input)
        assert editor.value == "" and editor.placeholder == f"{LAUNCH_HOST} (vtc default)"


async def test_with_033s_parser_the_form_offers_watchdog_and_refuses_medusa_in_its_words() -> None:
    # issue 19, "Done when": 0.33's parser in place (its shipped table, which the realvllm
    # oracle holds equal to the real 0.33 parser); 0.32's offers no --watchdog-config
    for version, offered in (("0.33.0", True), ("0.32.0", False)):
        session = FakeSession(mode_label=REAL, vllm_cli=table_for(version).cli)
        app = create_app(session, clock=None)
        async with app.run_test(size=(80, 24)) as pilot:
            form = app.main_screen.form
            app.query_one("#flag-search", Input).focus()
            await pilot.pause()
            await pilot.press(*"watchdog")
            await pilot.pause()
            names = [f.name for f in app.query_one(FlagSearch).matches]
            assert ("--watchdog-config" in names) is offered, version
            if not offered:
                continue
            await pilot.press("enter")
            await pilot.pause()
            assert form.field("extra_args").value == "--watchdog-config "
            medusa = '{"method": "medusa", "model": "m", "num_speculative_tokens": 2}'
            form.field("extra_args").set_value(f"--speculative-config '{medusa}'")
            await pilot.pause()
            flags, _ = form.validate_flags()
            assert flags is None
            error = str(form.field("extra_args").query_one(".field-error").render())
            # pydantic's words, as vLLM 0.33 prints them (config/speculative.py's Literal)
            assert "validation error for SpeculativeConfig" in error
            assert "Input should be 'ngram'" in error and "input_value='medusa'" in error
