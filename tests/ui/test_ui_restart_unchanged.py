"""``r`` with the very flags the server runs says so (issue 29: the README's story, ``f``
then ``r`` again, made an identical junk run without a word); it still restarts."""

from __future__ import annotations

from fakes.waiting import until
from ui_fakes import NoteLog, populated_session

from tui.domain.events import ServerState
from tui.ui.app import create_app


async def test_a_restart_with_nothing_changed_says_so_and_a_changed_one_does_not() -> None:
    session = populated_session()  # ready, the form holding the live run's flags
    app = create_app(session, clock=None)
    notes = NoteLog(app)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("r")
        await until(lambda: len(session.restarted_with) == 1, "the restart")
        assert "Nothing changed: The form's flags are #3's" in notes.text()
        assert session.restarted_with[0] == session.runs[-1].flags  # it restarted all the same
        notes.items.clear()
        app.main_screen.form.field("max_num_seqs").set_value("4")
        await pilot.pause()
        app.main_screen.board.focus()
        await pilot.press("r")
        await until(lambda: len(session.restarted_with) == 2, "the second restart")
        assert "Nothing changed" not in notes.text()


async def test_the_same_flags_after_the_server_stopped_is_a_fresh_start_not_a_repeat() -> None:
    session = populated_session()
    session.state = ServerState.STOPPED
    app = create_app(session, clock=None)
    notes = NoteLog(app)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("r")
        await until(lambda: len(session.restarted_with) == 1, "the restart")
        assert "Nothing changed" not in notes.text()
