"""The main screen's twin: the form's predicted line and ``k``, calibrate the server.

While the form is edited, the twin of the watched server (``SessionInfo.twin``) predicts
the edited command line and the form's workload, in the session's worker thread (never on
the console's loop), and the form's :class:`~tui.ui.widgets.twin_line.TwinLine` shows it,
labelled ``predicted`` with its profile and error. ``k`` calibrates the ready server: the
line shows the progress bar and ETA, a notice says when the profile is saved, and the
predictions use it from then on.
"""

from __future__ import annotations

import re
from typing import Any

from textual.screen import Screen

from tui.domain.calibration import Progress
from tui.domain.events import ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.inert import inert
from tui.session.port import SessionPort
from tui.ui.widgets.twin_line import TwinLine
from tui.ui.workers import run_guarded


def profile_name(model: str) -> str:
    """A profile name for a console calibration of ``model``: ``twin-<model's last part>``."""
    tail = re.sub(r"[^A-Za-z0-9._-]+", "-", model.rstrip("/").split("/")[-1]).strip("-.")
    return f"twin-{tail or 'server'}"[:64]


class TwinController:
    """Predictions for the form and calibration of the server, for ``host``."""

    def __init__(self, host: Screen[Any], session: SessionPort) -> None:
        self._host = host
        self._session = session

    def _line(self) -> TwinLine | None:
        found = self._host.query(TwinLine)
        return found.first() if found else None

    async def predict(self, flags: ServeFlags | None) -> None:
        """Predict ``flags`` with the form's workload (the screen's exclusive worker)."""
        twin, line = self._session.info.twin, self._line()
        if twin is None or line is None or twin.calibrating:
            return
        if flags is None:
            line.show(None)
            return
        from tui.ui.widgets.flag_form import FlagForm

        spec, _ = self._host.query_one(FlagForm).validate_workload()
        if spec is None:
            return
        prediction = await twin.predict(flags, spec)
        line.show(
            inert(prediction.line()) if prediction is not None else None,
            warn=prediction is not None and not prediction.starts,
        )

    def calibrate(self) -> None:
        """``k``: calibrate the ready server (its progress on the twin line)."""
        twin = self._session.info.twin
        current = self._session.current
        if twin is None:
            self._host.notify("This console has no twin.", severity="warning")
            return
        if self._session.state is not ServerState.READY or current is None:
            self._host.notify("k calibrates a ready server (r starts it).", severity="warning")
            return
        if twin.calibrating or self._session.load_running:
            self._host.notify("Busy: a load or a calibration runs.", severity="warning")
            return
        name = profile_name(current.flags.model)
        self._host.notify(f"Calibrating the twin {name}: a few minutes of designed loads.")

        def show(progress: Progress) -> None:
            line = self._line()
            if line is not None:
                line.show(f"calibrating {name}: {progress.line(12)}")

        async def job() -> None:
            try:
                said = await twin.calibrate(name, show)
            finally:
                line = self._line()
                if line is not None:
                    line.show(None)
            self._host.notify(inert(said), title="Calibrated")

        run_guarded(self._host, "Calibration", job, key="k")
