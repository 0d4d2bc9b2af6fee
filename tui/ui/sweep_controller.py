"""The main screen's sweep commands (``w``): one object, owned by the screen.

It opens the sweep screen from the form's flags, forwards the sweep's updates to it, puts
an applied best into the form, and says whether a sweep drives the server now (the main
screen then refuses ``r``/``b``/``f`` with one line, and raises no notice per trial: no
"b runs the load" or "f applies its fix" for keys the sweep refuses).
What runs is read from the session's sweeps each time, never kept here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.screen import Screen

from tui.domain.results import RunRecord
from tui.session.port import SessionPort, SweepUpdated
from tui.ui.screen_keeper import open_kept
from tui.ui.screens.sweep import ApplyBest, SweepScreen
from tui.ui.widgets.flag_form import FlagForm

SWEEP_SCREEN = "vtc-sweep"
"""The name the sweep screen is kept under (tui.ui.screen_keeper.open_kept)."""


class SweepController:
    """Opens, feeds and closes the sweep screen of ``host`` (the main screen)."""

    def __init__(
        self,
        host: Screen[Any],
        session: SessionPort,
        form: Callable[[], FlagForm],
        baseline: Callable[[], RunRecord | None] = lambda: None,
    ) -> None:
        self._host = host
        self._session = session
        self._form = form
        self._baseline = baseline  # the board's baseline: a sweep's best is compared with it
        self._screen: SweepScreen | None = None  # open now
        self._kept: tuple[object, SweepScreen] | None = None  # (what it was built from, it)

    @property
    def running(self) -> bool:
        """Whether a sweep drives the server now (as the session's sweeps say)."""
        sweeps = self._session.info.sweeps
        return sweeps is not None and sweeps.running

    def refuses(self, key: str) -> bool:
        """A sweep drives the server: the operator's own restarts and loads wait (one line)."""
        if not self.running:
            return False
        self._host.notify(
            f"A sweep is running: {key} is refused (w shows it; x there stops it).",
            severity="warning",
        )
        return True

    def updated(self, event: SweepUpdated) -> None:
        """Show the sweep's new status on its screen; say when it ended."""
        if self._screen is not None and self._screen.is_attached:
            self._screen.show(event.status)
        if not event.status.live and event.status.message:
            self._host.notify(f"Sweep {event.status.name}: {event.status.message}", timeout=8)

    def open(self) -> None:
        """Open the sweep screen, starting from the form's flags and workload: the screen
        opened before while they are the same (building it is most of ``w``'s time: three
        dropdowns, a dozen fields, the trials table), a new one when they changed."""
        info = self._session.info
        if info.sweeps is None:
            self._host.notify(
                "This console runs no sweeps (attached to a server).", severity="warning"
            )
            return
        form = self._form()
        flags, _ = form.validate_flags()
        load, _ = form.validate_workload()
        base = (flags or info.initial_flags, load or info.initial_load)
        if self._kept is not None and self._kept[0] == base:
            screen = self._kept[1]  # the same base: shown again, composed once (its fields kept)
        else:
            screen = SweepScreen(self._session, *base, baseline=self._baseline)
            self._kept = (base, screen)
        self._screen = screen
        open_kept(self._host.app, SWEEP_SCREEN, screen, self._closed)

    def _closed(self, result: ApplyBest | None) -> None:
        self._screen = None
        if result is not None:
            self._form().load_flags(result.flags)
            self._host.notify(
                f"The sweep's best (trial {result.trial}) is in the form: r restarts it."
            )
