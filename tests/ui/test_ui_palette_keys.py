"""Fast, safe editing (issue 17 item 5), measured with Pilot at 80x24: the palette finds a
flag by name and focuses it with its value selected, the seed-000 story fits in 10 keys, a
single flag change and restart in 6 keys plus the value, q asks before stopping work, y
copies a run's ``vllm serve`` command."""

from __future__ import annotations

from typing import Any

from fakes.runs import served_run
from textual.command import CommandList, CommandPalette
from textual.pilot import Pilot
from textual.widgets import Input
from ui_fakes import MODEL, FakeSession, NoteLog, baseline_flags, kv_failure

from tui.domain.events import Failed, Ready, ServerState
from tui.ui.app import VtcApp, create_app
from tui.ui.screens.confirm_quit import ConfirmQuitScreen


class Keys:
    """Presses keys and counts them (the value typed into a field is counted apart)."""

    def __init__(self, pilot: Pilot[None]) -> None:
        self.pilot = pilot
        self.count = 0

    async def press(self, *keys: str) -> None:
        """Keys the operator presses to get somewhere: counted."""
        self.count += len(keys)
        await self.pilot.press(*keys)
        await settle(self.pilot)

    async def type_value(self, text: str) -> None:
        """The value itself (not counted: "plus the value")."""
        await self.pilot.press(*text)
        await settle(self.pilot)

    async def palette_pick(self, query: str, expected: str) -> None:
        """ctrl+p, ``query``, Enter, once the palette's first hit is ``expected``."""
        await self.press("ctrl+p")
        assert isinstance(self.pilot.app.screen, CommandPalette)
        self.count += len(query)
        await self.pilot.press(*query)
        hits = self.pilot.app.screen.query_one(CommandList)
        for _ in range(200):  # the palette gathers hits in a worker: wait for them
            await self.pilot.pause()
            if hits.option_count and hits.highlighted == 0:
                first = str(hits.get_option_at_index(0).prompt)
                if expected in first:
                    break
        assert expected in str(hits.get_option_at_index(0).prompt)
        await self.press("enter")


async def settle(pilot: Pilot[None]) -> None:
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def ready_session() -> FakeSession:
    """A fresh demo console: the first run served (seed 000's 400-token configuration)."""
    first = served_run(1, model=MODEL, max_model_len=400, gpu_memory_utilization=0.9)
    session = FakeSession(runs=[first], state=ServerState.READY, initial_flags=baseline_flags())
    return session


def make(session: FakeSession) -> tuple[VtcApp, NoteLog]:
    app = create_app(session, clock=None)
    return app, NoteLog(app)


def board_text(app: VtcApp) -> str:
    return "\n".join(str(w.render()) for w in app.main_screen.board.query("*") if w.display)


async def test_seed_000_story_in_at_most_10_keys() -> None:
    """Open, set max_model_len 30576, restart, read the failure, fix, load: 10 keys at most
    (the value not counted), every step read off the screen as the operator reads it."""
    session = ready_session()
    app, notes = make(session)
    async with app.run_test(size=(80, 24)) as pilot:
        keys = Keys(pilot)
        await keys.palette_pick("mml", "max-model-len")
        field = app.query_one("#in-max_model_len", Input)
        assert app.focused is field and field.selected_text == "400"  # typing replaces it
        await keys.type_value("30576")
        assert field.value == "30576"
        await keys.press("f5")  # restart from inside the field
        assert session.restarted_with[-1].max_model_len == 30576
        session.emit(Failed(elapsed=20.0, exit_code=1, diagnosis=kv_failure()))
        await settle(pilot)
        card = board_text(app)
        assert "at most 1136 tokens" in card and "f applies fix 1" in card  # the failure, read
        await keys.press("f7")  # the fix, from inside the field too
        assert session.restarted_with[-1].max_model_len == 1136
        session.state = ServerState.READY  # what the real slot's state says once ready
        session.emit(Ready(elapsed=30.0))
        await settle(pilot)
        await keys.press("f6")  # the load
        assert session.loads, notes.text()
        assert keys.count <= 10, keys.count


async def test_any_single_flag_change_and_restart_in_6_keys_plus_the_value() -> None:
    """max-num-seqs was the 12th Tab stop and quantization the 17th: the palette reaches
    each by name."""
    for query, label, field_id, value, read in (
        ("mns", "max-num-seqs", "max_num_seqs", "64", lambda f: f.max_num_seqs),
        ("qu", "quantization", "quantization", "fp8", lambda f: f.quantization),
        (
            "gmu",
            "gpu-memory-utilization",
            "gpu_memory_utilization",
            "0.8",
            lambda f: f.gpu_memory_utilization,
        ),
    ):
        session = ready_session()
        app, _ = make(session)
        async with app.run_test(size=(80, 24)) as pilot:
            keys = Keys(pilot)
            await keys.palette_pick(query, label)
            assert app.focused is app.query_one(f"#in-{field_id}", Input)
            await keys.type_value(value)
            await keys.press("f5")
            assert str(read(session.restarted_with[-1])) == value
            assert keys.count <= 6, (label, keys.count)


async def test_the_palette_runs_commands_and_the_filter_dialog_replaces_its_suggestion() -> None:
    session = ready_session()
    app, _ = make(session)
    async with app.run_test(size=(80, 24)) as pilot:
        keys = Keys(pilot)
        await keys.palette_pick("tabl", "Table")
        assert app.main_screen.board.table_mode
        await pilot.press("/")  # the filter dialog: its suggestion is selected
        await settle(pilot)
        editor = app.screen.query_one("#ask-input", Input)
        await pilot.press(*"failed", "enter")
        await settle(pilot)
        assert app.main_screen.board.view.filter is not None
        assert editor.value == "failed"  # not "block_size=16failed"


async def test_q_asks_before_stopping_a_server_and_one_key_decides() -> None:
    session = ready_session()
    app, _ = make(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("q")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmQuitScreen)
        what = str(app.screen.query_one("#quit-what").render())
        assert "the server (run #1)" in what
        await pilot.press("x")  # any other key: stay
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmQuitScreen) and "close" not in session.calls
        session.load_running = True
        await pilot.press("q")
        await settle(pilot)
        assert "the running load" in str(app.screen.query_one("#quit-what").render())
        app.screen.dismiss(True)  # what q would do; pressing it ends the app under the pilot
        await settle(pilot)
        assert session.closed


async def test_y_copies_the_selected_runs_vllm_serve_command_and_says_so(monkeypatch: Any) -> None:
    session = ready_session()
    app, notes = make(session)
    copied: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
        await pilot.press("y")
        await settle(pilot)
    assert copied and copied[0].startswith(f"vllm serve {MODEL}")
    assert "--max-model-len 400" in copied[0]
    assert "copied (OSC 52)" in notes.text()


async def test_the_key_bar_shows_the_keys_that_fit_and_one_that_lists_the_rest() -> None:
    """Issue 39 item 2: at 80x24 w, a, h, k and ^p are in sight beside r and b, and the
    help key says how many keys it adds; 120x40 shows more (k included); 160 more again.
    Every key works at every width (w opens the sweep screen at each)."""
    from textual.widgets import Footer

    from tui.ui.screens.sweep import SweepScreen

    for size, shown in (
        ((80, 24), {"r", "b", "w", "a", "h", "k", "^p", "?"}),
        ((120, 40), {"r", "b", "w", "a", "h", "k", "^p", "t", "s", "Enter", "?"}),
        ((160, 40), {"r", "b", "w", "a", "h", "k", "^p", "t", "s", "p", "v", "Enter", "?"}),
    ):
        app, _ = make(ready_session())
        async with app.run_test(size=size) as pilot:

            def bar(app: VtcApp = app) -> dict[str, str]:
                keys = app.query_one(Footer).query("FooterKey")
                return {k.key_display: k.description for k in keys}  # type: ignore[attr-defined]

            for _ in range(100):  # the footer recomposes after mount: wait for its keys
                await pilot.pause()
                if shown <= set(bar()):
                    break
            assert shown <= set(bar()), (size, bar())
            more = bar()["?"]
            assert more.endswith(" more"), more  # it says so: "? 9 more"
            assert sum(len(k) + len(d) + 2 for k, d in bar().items()) - 1 <= size[0]
            await pilot.press("w")
            await settle(pilot)
            assert isinstance(app.screen, SweepScreen), size


def in_sight(app: VtcApp, field_id: str) -> bool:
    """Whether the field's editor is drawn inside the form's scrolling area now."""
    editor = app.query_one(f"#in-{field_id}")
    area = app.query_one("#form-fields")
    return area.display and editor.region.height > 0 and area.region.contains_region(editor.region)


async def test_a_palette_jump_shows_the_field_it_edits_from_any_view() -> None:
    """Issue 39 item 5: from the table view (the form hidden at 80 columns) the jump edited a
    field that stayed off screen. Every jump, from the table or the cards, declared or an
    undeclared flag of the installed vLLM (its own row), ends with the field in sight."""
    from tui.domain.flags.vllm_tables import table_for

    for query, label, field_id in (
        ("context length", "max-model-len", "max_model_len"),
        ("kv offload", "kv-offloading-size", "cli-kv_offloading_size"),
        ("request rate", "request-rate", "load-request_rate"),
    ):
        session = ready_session()
        session.vllm_cli = table_for("0.32.0").cli
        app, _ = make(session)
        async with app.run_test(size=(80, 24)) as pilot:
            keys = Keys(pilot)
            await keys.press("t")
            assert app.main_screen.board.table_mode
            await keys.palette_pick(query, label)
            for _ in range(50):  # the cards come back, then the form scrolls: wait for it
                await pilot.pause()
                if in_sight(app, field_id):
                    break
            assert not app.main_screen.board.table_mode
            assert app.focused is app.query_one(f"#in-{field_id}")
            assert in_sight(app, field_id), query
