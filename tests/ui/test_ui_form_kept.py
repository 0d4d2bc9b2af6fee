"""The console keeps its flags form for the next one (issue 39, item 5): a valid edit, once
it has rested, goes to the session's tools; an invalid one and the untouched form do not."""

from __future__ import annotations

from typing import Any

from fakes.waiting import until
from textual.pilot import Pilot
from textual.widgets import Input
from ui_fakes import FakeSession, board_session

from tui.ui.app import create_app


async def _type_into(pilot: Pilot[Any], name: str, text: str) -> None:
    form = pilot.app.main_screen.form  # type: ignore[attr-defined]
    field = form.field(name).editor
    assert isinstance(field, Input)
    form.focus_field(name)  # its value selected: typing replaces it
    await pilot.pause()
    await pilot.press(*text)
    await pilot.pause()


async def test_a_valid_edit_is_kept_once_and_an_invalid_one_never() -> None:
    session: FakeSession = board_session()
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.pause(0.8)
        assert session.tools.form_saves == []  # the form as it started: nothing to write
        await _type_into(pilot, "max_num_seqs", "48")
        await until(lambda: bool(session.tools.form_saves), "the form kept")
        (kept,) = session.tools.form_saves
        assert kept.flags.max_num_seqs == 48
        assert kept.load == session.info.initial_load
        await _type_into(pilot, "max_num_seqs", "-3")  # invalid: never kept
        await pilot.pause(0.8)
        assert len(session.tools.form_saves) == 1
