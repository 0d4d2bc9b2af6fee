"""The main screen's sweep commands (``w``), kept out of ``main.py`` (its size bound).

``MainScreen`` inherits them: open the sweep screen from the form, route the sweep's
updates to it, put an applied best into the form, and refuse ``r``/``b``/``f`` while a
sweep drives the server.
"""

from __future__ import annotations

from textual.screen import Screen

from tui.session.port import SessionPort, SweepUpdated
from tui.ui.screens.sweep import ApplyBest, SweepScreen
from tui.ui.widgets.flag_form import FlagForm


class SweepActions(Screen[None]):
    """The sweep commands of a screen that has a session and a flag form."""

    session: SessionPort
    _sweep_screen: SweepScreen | None = None

    @property
    def form(self) -> FlagForm:
        """The flags form (the main screen's)."""
        raise NotImplementedError

    def _sweep_refuses(self, key: str) -> bool:
        """A sweep drives the server: the operator's own restarts and loads wait (one line)."""
        sweeps = self.session.info.sweeps
        if sweeps is None or not sweeps.running:
            return False
        self.notify(f"A sweep is running: {key} is refused (w shows it; x there stops it).",
                    severity="warning")  # fmt: skip
        return True

    def _sweep_updated(self, event: SweepUpdated) -> None:
        if self._sweep_screen is not None and self._sweep_screen.is_attached:
            self._sweep_screen.show(event.status)
        if not event.status.live and event.status.message:
            self.notify(f"Sweep {event.status.name}: {event.status.message}", timeout=8)

    def action_sweep(self) -> None:
        """Open the sweep screen, starting from the form's flags and workload."""
        if self.session.info.sweeps is None:
            self.notify("This console runs no sweeps (attached to a server).", severity="warning")
            return
        flags, _ = self.form.validate_flags()
        load, _ = self.form.validate_workload()
        info = self.session.info
        screen = SweepScreen(self.session, flags or info.initial_flags, load or info.initial_load)
        self._sweep_screen = screen
        self.app.push_screen(screen, callback=self._sweep_closed)

    def _sweep_closed(self, result: ApplyBest | None) -> None:
        self._sweep_screen = None
        if result is not None:
            self.form.load_flags(result.flags)
            self.notify(f"The sweep's best (trial {result.trial}) is in the form: r restarts it.")
