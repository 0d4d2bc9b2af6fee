"""The tuning loop's keys on the main screen: restart (``r``), load (``b``), the one-key fix
(``f``), advice into the form, cancel the load, stop the server, save the form as a preset.

A mixin of :class:`~tui.ui.screens.main.MainScreen`, apart from its layout and the routing
of session events: each command reads the form, asks the session, and says what it did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tui.domain.board.baseline import run_label
from tui.domain.events import ServerState
from tui.domain.fix_loop import choose_fix
from tui.domain.flags.serve import FlagProblem, ServeFlags
from tui.domain.flags.serve_diff import diff_flags
from tui.session.port import SessionPort
from tui.ui.run_detail_text import fix_settings_text
from tui.ui.run_requests import ask_and_save_preset
from tui.ui.sweep_controller import SweepController
from tui.ui.telemetry_control import NO_ADVICE, TelemetryControl
from tui.ui.widgets.flag_form import FlagForm
from tui.ui.widgets.load_panel import LoadPanel
from tui.ui.workers import run_guarded

# A plain mixin at run time: Textual reads a screen's CSS and bindings from its Screen base.
if TYPE_CHECKING:
    from textual.screen import Screen

    _Base = Screen[None]
else:
    _Base = object


def _point_at_problems(
    form: FlagForm, problems: list[FlagProblem], title: str, prefix: str = ""
) -> None:
    """Focus the first field a problem names; every problem in one notification."""
    name = form.first_problem_field(problems, prefix=prefix)
    if name is not None:
        form.focus_field(name)
    form.notify(_problem_summary(problems), title=title, severity="error")


def _problem_summary(problems: list[FlagProblem]) -> str:
    first = problems[0].message
    more = len(problems) - 1
    return first + (f" (and {more} more)" if more else "")


class LoopKeys(_Base):
    """``r b f a c s`` and saving a preset: the commands of the tuning loop."""

    session: SessionPort
    _sweeps: SweepController
    _telemetry: TelemetryControl

    @property
    def form(self) -> FlagForm:
        """The flags form (the screen's)."""
        return self.query_one(FlagForm)

    def action_restart(self) -> None:
        """Validate the form; if it holds, restart the server with it (the session refuses
        a second restart while one is under way: its one line is shown)."""
        if self._sweeps.refuses("r"):
            return
        flags, problems = self.form.validate_flags()
        if flags is None:
            _point_at_problems(self.form, problems, "Not restarted: invalid flags")
            return
        self._say_if_unchanged(flags)
        run_guarded(self, "Restart", lambda: self.session.restart(flags), key="r")

    def _say_if_unchanged(self, flags: ServeFlags) -> None:
        """A restart of the very flags the server runs makes a run identical to it: said,
        so an operator who meant to change something (the README's story: ``f``, then
        ``r`` again) learns it before the junk run lands on the board (issue 29)."""
        current = self.session.current
        if current is None or self.session.state is not ServerState.READY:
            return  # stopped or failed: the same flags again is a fresh start, not a repeat
        if diff_flags(current.flags, flags):
            return
        self.notify(
            f"The form's flags are {run_label(current)}'s: this run repeats it (n repeats a run "
            "on purpose; change a flag first to compare).",
            title="Nothing changed",
            severity="warning",
        )

    def action_bench(self) -> None:
        """Run the form's workload, if the server is ready."""
        if self._sweeps.refuses("b"):
            return
        state = self.session.state
        if state is not ServerState.READY:
            self.notify(
                f"The server is {state.value}; b needs it ready (r starts it).",
                title="No load run",
                severity="warning",
            )
            return
        spec, problems = self.form.validate_workload()
        if spec is None:
            _point_at_problems(self.form, problems, "No load run: invalid workload", "load-")
            return
        if self.session.load_running:  # the session refuses a second load: say it before
            self.notify("A load is already running (c cancels it).", severity="warning")
            return
        self.query_one(LoadPanel).start(spec)
        run_guarded(self, "Load", lambda: self.session.run_load(spec), key="b")

    def action_fix(self) -> None:
        """One-key fix: the next untried fix into the form, then restart; after a failed
        fix, the next one of the failure it came from; says why when none is left
        (``tui.domain.fix_loop``): never loops."""
        if self._sweeps.refuses("f"):
            return
        choice = choose_fix(list(self.session.runs))
        if choice.fix is None or choice.run is None:
            self.notify(choice.reason, title="No fix applied", severity="warning", timeout=10)
            return
        fix = choice.fix
        self.form.apply_settings(choice.settings)
        settings = fix_settings_text(fix, choice.settings)
        title = f"Fix from run {choice.run.label}: restarting"
        self.notify(f"{fix.title}\n{settings}", title=title)
        self.action_restart()

    def action_apply_advice(self) -> None:
        """Put the first piece of advice's flags into the form (r then restarts with them)."""
        found = self._telemetry.advice_fix()
        if found is None:
            self.notify(NO_ADVICE, severity="warning")
            return
        fix, message = found
        self.form.apply_settings(fix.set)
        self.notify(message, title="Advice in the form")

    def action_cancel_load(self) -> None:
        """Cancel the running load."""
        if not self.session.load_running:
            self.notify("No load is running.", severity="warning")
            return
        run_guarded(self, "Cancel", self.session.cancel_load)

    def action_stop_server(self) -> None:
        """Stop the server this console started (attached: not offered, ``check_action``)."""
        run_guarded(self, "Stop", self.session.stop_server, key="s")

    def action_save_preset(self) -> None:
        """Ask a name, then save the form's flags and workload as one of the user's presets."""
        flags, problems = self.form.validate_flags()
        if flags is None:
            self.notify(
                _problem_summary(problems), title="Not saved: invalid flags", severity="error"
            )
            return
        ask_and_save_preset(self, self.session, self.form, flags)
