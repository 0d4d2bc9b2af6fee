"""The sweep screen (``w``): compose a sweep, watch it, stop it, apply its best.

While a sweep runs it drives the same session the operator does: its trials are runs on
the board (tagged with the sweep), and the main screen refuses ``r``/``b``/``f`` with one
line. Keys here: ``g`` start the composed sweep (F2), ``x`` stop (F3), ``u`` resume the
sweep this console ran and stopped (never another process's; on its own machine), ``a``
apply the best to the flags form, ``v`` Before / After of the baseline and the best,
``Esc``/``w`` close (the sweep runs on).

The screen opens with the focus on the strategy (a dropdown: letter keys act there), so
``g`` starts at once; in a text field letters are text: F2 and F3 act there (the key bar
shows F2 there), and Esc leaves the field before it closes the screen (issue 39: ``g`` typed
into the field and Esc closed the screen). Once a sweep ends, its best is compared with the
board's baseline: ``best 1252.4 tok/s, 7.0% below the baseline #3``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Select, Static

from tui.domain.board.before_after import BeforeAfter, before_after
from tui.domain.board.metrics import ALL_METRICS
from tui.domain.board.noise import NOISE_FLOOR_PCT, Groups
from tui.domain.errors import VtcError, one_line
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import RunRecord
from tui.domain.sweep import SweepStatus
from tui.domain.sweep.compose import ComposeError
from tui.domain.sweep.slo import OBJECTIVE_KEYS
from tui.domain.sweep.versus import versus_baseline
from tui.domain.workload import LoadSpec
from tui.session.port import SessionPort, SweepControl
from tui.ui.format import plain
from tui.ui.widgets.steady_footer import SteadyFooter
from tui.ui.widgets.sweep_before_after import SweepBeforeAfter
from tui.ui.widgets.sweep_composer import SweepComposer
from tui.ui.widgets.sweep_status import SweepStatusLine
from tui.ui.widgets.sweep_trials import SweepTrials

STYLES = Path(__file__).parent.parent / "styles"
SWEEP_KEYS_HELP = (
    "Sweep screen: g start the composed sweep (F2, also in a text field) · x stop (F3) · u "
    "resume the sweep this console stopped · a apply the best to the form · v Before/After of "
    "baseline vs best · Esc leaves a text field, then closes (w too; the sweep runs on)"
)


NOTHING_TO_RESUME = (
    "This console has run no sweep: u resumes the one it stopped (g starts the composed "
    "sweep, which resumes its journal if it ran before)"
)


@dataclass(frozen=True)
class ApplyBest:
    """The screen closed asking for the best trial's flags in the form."""

    flags: ServeFlags
    trial: int


def _served(runs: list[RunRecord], run_id: int | None) -> RunRecord | None:
    found = next((r for r in runs if r.id == run_id), None) if run_id is not None else None
    return found if found is not None and found.bench is not None else None


def baseline_and_best(
    runs: list[RunRecord], status: SweepStatus | None
) -> tuple[BeforeAfter | None, str]:
    """The Before / After of the sweep's baseline (the run it started from, else the first
    run with numbers) and its best trial's run; or why there is none."""
    if status is None or status.best is None:
        return None, "No best trial yet."
    best = _served(runs, status.best.run_id)
    if best is None:
        return None, "The best trial's run has no numbers on the board."
    base = _served(runs, status.baseline_run_id)
    if base is None:
        base = next((r for r in runs if r.bench is not None and r.id != best.id), None)
    if base is None:
        return None, "No baseline run with numbers: bench a run before sweeping."
    return before_after(base, best), ""


class SweepScreen(ModalScreen[ApplyBest | None]):
    """Progress, trials and verdicts of the session's sweep; the form to start one."""

    CSS_PATH = STYLES / "sweep.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        # Esc in a text field leaves it (shown there as Leave); elsewhere it closes.
        Binding("escape", "leave_field", "Leave", key_display="Esc"),
        Binding("escape,w", "close", "Close", key_display="Esc"),
        # The footer shows one key per action and drops the letters a field eats: in a
        # text field it lists F2/F3, elsewhere g/x (as the main screen's F-keys).
        Binding("g", "go", "Start"),
        Binding("f2", "go", "Start", key_display="F2", priority=True),
        Binding("x", "stop", "Stop"),
        Binding("f3", "stop", "Stop", key_display="F3", priority=True),
        Binding("u", "resume", "Resume"),
        Binding("a", "apply_best", "Apply best"),
        Binding("v", "before_after", "Before/After"),
    ]

    def __init__(
        self,
        session: SessionPort,
        flags: ServeFlags,
        load: LoadSpec,
        baseline: Callable[[], RunRecord | None] = lambda: None,
    ) -> None:
        super().__init__()
        self.session = session
        self._flags, self._load = flags, load
        self._board_baseline = baseline  # the board's baseline now (it may change meanwhile)
        self._resumed = False  # shown before: each later showing reads the sweep anew

    @property
    def control(self) -> SweepControl:
        """The session's sweeps (the main screen opens this screen only when there are)."""
        sweeps = self.session.info.sweeps
        assert sweeps is not None
        return sweeps

    def compose(self) -> ComposeResult:
        """Head, the form, the trials, the Before / After."""
        with Vertical(id="sweep-box"):
            yield SweepStatusLine(id="sweep-status")
            yield SweepComposer(self._flags, self._load, id="sweep-composer")
            yield SweepTrials(id="sweep-trials")
            yield Static("", id="sweep-trial-detail")
            yield SweepBeforeAfter(id="sweep-ba")
        yield SteadyFooter()

    def on_mount(self) -> None:
        """Title, then the sweep as it stands."""
        box = self.query_one("#sweep-box")
        box.border_title = "Sweep"
        box.border_subtitle = f"from {plain(self._flags.model)}"
        self.query_one(SweepBeforeAfter).display = False
        self.show(self.control.status)
        self._focus_home()

    def on_screen_resume(self) -> None:
        """Shown again (kept while the form's flags stay: tui.ui.sweep_controller): the sweep
        as it stands now, the focus where the letter keys act."""
        if self._resumed:
            self.show(self.control.status)
            self._focus_home()
        self._resumed = True

    def _focus_home(self) -> None:
        """Focus where the screen's letter keys act: the strategy dropdown while the form
        shows, else the trials."""
        if self.control.running:
            self.query_one(SweepTrials).focus()
        else:
            self.query_one("#sweep-strategy", Select).focus()

    def show(self, status: SweepStatus | None) -> None:
        """Render ``status`` (the main screen forwards every ``SweepUpdated``)."""
        self.query_one(SweepStatusLine).show(status, self._versus(status))
        self.query_one(SweepTrials).show(status)
        self.query_one(SweepComposer).display = not self.control.running
        self.refresh_bindings()  # g/u or x, as the sweep now stands
        ba = self.query_one(SweepBeforeAfter)
        if ba.display:
            ba.show(*baseline_and_best(list(self.session.runs), status))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The key bar offers only what applies now: start and resume while no sweep runs,
        stop while one does; Esc leaves a text field, else closes."""
        in_field = isinstance(self.focused, Input)
        if action == "leave_field":
            return in_field
        if action == "close":
            return not in_field
        if action in ("go", "resume"):
            return not self.control.running
        if action == "stop":
            return self.control.running
        return True

    def on_sweep_trials_trial_chosen(self, message: SweepTrials.TrialChosen) -> None:
        """The highlighted trial, whole: its reason is never cut (the table's cell may be)."""
        self.query_one("#sweep-trial-detail", Static).update(Content(message.text))

    def _versus(self, status: SweepStatus | None) -> str | None:
        """The ended sweep's best against the board's baseline, in the board's noise band."""
        if status is None or status.live or status.best is None:
            return None
        runs = list(self.session.runs)
        metric = ALL_METRICS.get(OBJECTIVE_KEYS.get(status.objective, status.objective))
        band = Groups(runs).band(metric) if metric is not None else NOISE_FLOOR_PCT
        return versus_baseline(status, self._board_baseline(), band)

    # -- actions -----------------------------------------------------------------------------
    def _baseline(self) -> int | None:
        current = self.session.current
        return current.id if current is not None and current.bench is not None else None

    def action_go(self) -> None:
        """Start the composed sweep (a spec that ran before resumes)."""
        if self.control.running:
            self.notify("A sweep is running: x stops it.", severity="warning")
            return
        composer = self.query_one(SweepComposer)
        try:
            spec, cluster = composer.spec(), composer.cluster()
            self.control.start(spec, baseline_run_id=self._baseline(), cluster=cluster)
        except (ComposeError, VtcError) as exc:
            self.notify(one_line(exc), title="Sweep not started", severity="error")
            return
        where = f" on {cluster.describe()}" if cluster is not None else ""
        self.notify(
            f"Sweep {spec.name} started{where}: {spec.strategy}, {spec.space_size()} combinations"
        )
        self.show(self.control.status)

    def action_stop(self) -> None:
        """Stop the running sweep (the trial in flight runs again when it resumes)."""
        if not self.control.running:
            self.notify("No sweep is running.", severity="warning")
            return
        self.notify("Stopping the sweep: the trial in flight is cut short.")
        self.run_worker(self.control.stop(), group="sweep-stop", exit_on_error=False)

    def action_resume(self) -> None:
        """Resume the sweep this screen ran (its sweep id), never another process's."""
        if self.control.running:
            self.notify("A sweep is running.", severity="warning")
            return
        status = self.control.status
        if status is None:
            self.notify(NOTHING_TO_RESUME, title="Not resumed", severity="warning")
            return

        async def resume() -> None:
            try:
                spec = await self.control.resume(status.sweep_id, baseline_run_id=self._baseline())
            except VtcError as exc:
                self.notify(exc.one_line(), title="Not resumed", severity="error")
                return
            self.notify(f"Resuming {spec.name}: finished trials are not run again.")

        self.run_worker(resume(), group="sweep-resume", exit_on_error=False)

    def action_apply_best(self) -> None:
        """Close, loading the best trial's flags into the form."""
        status = self.control.status
        best = status.best if status is not None else None
        if best is None or best.flags is None:
            self.notify("No best trial yet.", severity="warning")
            return
        self.dismiss(ApplyBest(best.flags, best.index))

    def action_before_after(self) -> None:
        """Show (or hide) the Before / After of the baseline and the best."""
        view = self.query_one(SweepBeforeAfter)
        view.display = not view.display
        if view.display:
            view.show(*baseline_and_best(list(self.session.runs), self.control.status))

    def action_leave_field(self) -> None:
        """Esc in a text field: focus back where the letter keys act."""
        self._focus_home()

    def action_close(self) -> None:
        """Close the screen; a running sweep goes on."""
        self.dismiss(None)
