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


async def find(pilot: object, app: object, words: str) -> list[str]:
    """Type ``words`` in the form's search box; the options it lists."""
    box = app.query_one("#flag-search", Input)  # type: ignore[attr-defined]
    box.focus()  # Tab reaches it too (below the flags)
    box.value = ""
    await pilot.pause()  # type: ignore[attr-defined]
    await pilot.press(*words)  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    return [d.option for d in app.query_one(FlagSearch).matches]  # type: ignore[attr-defined]


async def test_the_search_finds_flags_by_what_they_do_declared_or_not() -> None:
    session = FakeSession(mode_label=REAL, vllm_cli=table_for("0.32.0").cli)
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        assert "more flags of vLLM 0.32.0" in note(app)
        assert (await find(pilot, app, "context length"))[0] == "--max-model-len"
        assert (await find(pilot, app, "cuda"))[0] == "--enforce-eager"
        assert (await find(pilot, app, "kv offload"))[:2] == [
            "--kv-offloading-size",
            "--kv-offloading-backend",
        ]
        options = app.query_one("#flag-matches", OptionList)
        assert options.display and options.option_count >= 2
        first = str(options.get_option_at_index(0).prompt)
        assert "--kv-offloading-size" in first and "Size of the KV cache offloading" in first


async def test_enter_on_a_declared_flag_focuses_its_field() -> None:
    session = FakeSession(mode_label=REAL, vllm_cli=table_for("0.32.0").cli)
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await find(pilot, app, "context length")
        await pilot.press("enter")
        await pilot.pause()
        assert app.focused is app.main_screen.form.field("max_model_len").editor


async def test_an_undeclared_flag_gets_a_validated_row_and_travels_as_extra_args() -> None:
    session = FakeSession(
        mode_label=REAL,
        vllm_cli=table_for("0.32.0").cli,
        initial_flags=ServeFlags(model=MODEL, extra_args=("--seed", "7")),
    )
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        form = app.main_screen.form
        # a flag the extra args named is a row of its own; the extra args field is left empty
        assert form.field("cli-seed").value == "7" and form.field("extra_args").value == ""
        await find(pilot, app, "kv offload")
        await pilot.press("enter")
        await pilot.pause()
        row = form.field("cli-kv_offloading_size")
        assert app.focused is row.editor
        await pilot.press(*"lots")
        await pilot.pause()
        flags, problems = form.validate_flags()
        assert flags is None
        assert [p.field for p in problems] == ["cli-kv_offloading_size"]
        error = str(row.query_one(".field-error").render())
        assert "argument --kv-offloading-size: Value lots cannot be converted to float." in error
        row.set_value("8")
        await pilot.pause()
        flags, problems = form.validate_flags()
        assert problems == [] and flags is not None
        assert flags.extra_args == ("--seed", "7", "--kv-offloading-size", "8")
        # loading flags back fills the rows (and empties those the flags do not name)
        form.load_flags(ServeFlags(model=MODEL, extra_args=("--kv-offloading-size", "2")))
        await pilot.pause()
        assert form.field("cli-kv_offloading_size").value == "2"
        assert form.field("cli-seed").value == ""


async def test_a_json_config_row_is_checked_as_vllm_checks_it() -> None:
    session = FakeSession(mode_label=REAL, vllm_cli=table_for("0.33.0").cli)
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        form = app.main_screen.form
        await find(pilot, app, "speculative")
        await pilot.press("enter")
        await pilot.pause()
        row = form.field("cli-speculative_config")
        assert app.focused is row.editor
        row.set_value("ngram")
        await pilot.pause()
        assert "expected a JSON object" in str(row.query_one(".field-error").render())
        row.set_value('{"method": "medusa", "model": "m", "num_speculative_tokens": 2}')
        await pilot.pause()
        flags, _ = form.validate_flags()
        assert flags is None
        error = str(row.query_one(".field-error").render())
        assert "validation error for SpeculativeConfig" in error and "'medusa'" in error
        good = '{"method": "ngram", "num_speculative_tokens": 4}'
        row.set_value(good)
        await pilot.pause()
        flags, problems = form.validate_flags()
        assert problems == [] and flags is not None
        assert flags.extra_args == ("--speculative-config", good)


async def test_without_a_flag_list_the_section_says_why_and_picks_it_up_later() -> None:
    demo = FakeSession()  # demo label, no list
    app = create_app(demo, clock=None)
    async with app.run_test(size=(80, 24)):
        assert DEMO_REASON in note(app)
        assert "extra args: vLLM 0.33.0's table" in note(app)  # which table is in force
        assert not app.query_one("#flag-matches", OptionList).display

    session = FakeSession(mode_label=REAL)
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        assert LOADING_REASON in note(app)
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
            names = [f.option for f in app.query_one(FlagSearch).matches]
            assert ("--watchdog-config" in names) is offered, version
            if not offered:
                continue
            await pilot.press("enter")
            await pilot.pause()
            assert app.focused is form.field("cli-watchdog_config").editor
            medusa = '{"method": "medusa", "model": "m", "num_speculative_tokens": 2}'
            form.field("extra_args").set_value(f"--speculative-config '{medusa}'")
            await pilot.pause()
            flags, _ = form.validate_flags()
            assert flags is None
            error = str(form.field("extra_args").query_one(".field-error").render())
            # pydantic's words, as vLLM 0.33 prints them (config/speculative.py's Literal)
            assert "validation error for SpeculativeConfig" in error
            assert "Input should be 'ngram'" in error and "input_value='medusa'" in error
