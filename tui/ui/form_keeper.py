"""The flags form kept for the next console: one object, owned by the main screen.

After each valid edit has rested for :data:`REST_S`, the form's flags, workload and preset go
to the session's tools, whose files adapter is the form file's one writer
(:mod:`tui.store.form_file`); the next console of the same history starts from it (issue 39:
a relaunch reset the form). An attached console keeps nothing: its form is the server's own.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.timer import Timer
from textual.widget import Widget

from tui.domain.flags.serve import ServeFlags
from tui.domain.saved_form import SavedForm
from tui.session.port import SessionPort
from tui.ui.widgets.flag_form import FlagForm
from tui.ui.workers import run_guarded

REST_S = 0.5
"""Seconds a valid edit rests before it is kept: typing a number writes once, not per key."""


class FormKeeper:
    """Keeps ``form()``'s valid state through ``session``'s tools, for the next console."""

    def __init__(self, host: Widget, session: SessionPort, form: Callable[[], FlagForm]) -> None:
        self._host = host
        self._session = session
        self._form = form
        info = session.info
        # what the console started from is kept already: no write until it changes
        self._kept = SavedForm(info.initial_flags, info.initial_load, info.initial_preset)
        self._timer: Timer | None = None

    def changed(self, flags: ServeFlags | None) -> None:
        """The form was validated (``flags`` ``None``: invalid, nothing is kept)."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if flags is not None and self._session.can_restart:
            self._timer = self._host.set_timer(REST_S, self._keep)

    def _keep(self) -> None:
        self._timer = None
        form = self._form()
        flags, _ = form.validate_flags()
        load, _ = form.validate_workload()
        if flags is None or load is None:
            return
        chosen = form.chosen_preset
        saved = SavedForm(flags, load, chosen.name if chosen is not None else None)
        if saved == self._kept:
            return
        self._kept = saved
        run_guarded(self._host, "Keep the form", lambda: self._session.tools.save_form(saved))
