"""The main screen: every panel at once, the keys, and the routing of session events."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.widgets import Footer, Input, Select

from tui.domain.board.baseline import run_label
from tui.domain.errors import one_line
from tui.domain.events import Failed, Launched, LogLine, Ready, ServerEvent, ServerState
from tui.domain.fix_loop import choose_fix
from tui.domain.flags.serve import FlagProblem, ServeFlags, format_value
from tui.domain.telemetry import GpuSample, HostSample, ServerMetrics
from tui.domain.workload import LoadProgress
from tui.session.port import (
    LoadFinished,
    RunUpdated,
    SessionEvent,
    SessionPort,
    SweepUpdated,
    TelemetryStatus,
)
from tui.ui.keys import screen_bindings
from tui.ui.presets_view import check_preset_name, preset_from_form
from tui.ui.screens.ask import AskScreen
from tui.ui.screens.help import HelpScreen
from tui.ui.screens.sweep_actions import SweepActions
from tui.ui.server_view import project
from tui.ui.telemetry_control import NO_ADVICE, TelemetryControl
from tui.ui.widgets.flag_form import FlagForm
from tui.ui.widgets.flag_search import CliStatus, cli_status
from tui.ui.widgets.gpu_panel import GpuPanel
from tui.ui.widgets.load_panel import LoadPanel
from tui.ui.widgets.metrics_panel import MetricsPanel
from tui.ui.widgets.results_board import ResultsBoard
from tui.ui.widgets.server_panel import ServerPanel

Clock = Callable[[], float]


def _problem_summary(problems: list[FlagProblem]) -> str:
    first = problems[0].message
    more = len(problems) - 1
    return first + (f" (and {more} more)" if more else "")


class MainScreen(SweepActions):
    """Server, GPU, Metrics and Load on top; the flags form and the results board below."""

    BINDINGS: ClassVar[list[BindingType]] = screen_bindings()
    # The board takes focus first, so the letter keys act at once; Tab reaches the form.
    AUTO_FOCUS = "#board"
    # Screen declares these as plain annotations, so no ClassVar here (mypy would object).
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]  # noqa: RUF012
    VERTICAL_BREAKPOINTS = [(0, "-short"), (34, "-tall")]  # noqa: RUF012

    def __init__(self, session: SessionPort, *, clock: Clock | None = None) -> None:
        super().__init__()
        self.session = session
        self._clock = clock
        self._launched_at: float | None = None
        self._pid: int | None = None  # live: the record does not keep the process id
        self._view = project(session.current, session.state)
        self._restarting = False
        self._loading = False
        # Events that arrive before the panels exist (the session may start talking first).
        self._backlog: list[SessionEvent] | None = []
        self._telemetry = TelemetryControl(session, live=clock is not None)

    # -- layout -----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        """All panels on one screen (no tabs): narrow terminals get compact panels."""
        yield ServerPanel(id="server", classes="panel")
        with Horizontal(id="strip"):
            yield GpuPanel(self.session.history, id="gpu", classes="panel")
            yield MetricsPanel(self.session.history, id="metrics", classes="panel")
            yield LoadPanel(self.session.info.initial_load, id="load", classes="panel")
        with Horizontal(id="work"):
            yield FlagForm(
                self.session.info.initial_flags,
                self.session.info.initial_load,
                list(self.session.info.presets),
                initial_preset=self.session.info.initial_preset,
                cli_status=self._cli_status,
                id="form",
                classes="panel",
            )
            yield ResultsBoard(self.session, id="board", classes="panel")
        yield Footer()

    def _cli_status(self) -> CliStatus:
        """The installed vLLM's flag list as the session has it now (it loads after start)."""
        session = self.session
        return cli_status(session.vllm_cli, session.vllm_cli_error, session.info.no_flag_list)

    def on_mount(self) -> None:
        """Titles, then what the session already knows (a late start shows the board)."""
        self.query_one("#server").border_title = f"Server · {self.session.info.label}"
        for selector, title in (
            ("#gpu", "GPU"),
            ("#metrics", "Metrics"),
            ("#load", "Load"),
            ("#form", "Flags"),
            ("#board", "Runs"),
        ):
            self.query_one(selector).border_title = title
        self.server_panel.view = self._view
        self.server_panel.tail.set_lines(self.session.log_lines)
        self.board.show(list(self.session.runs))
        if self._clock is not None:
            self.set_interval(1.0, self._tick)
        backlog, self._backlog = self._backlog or [], None
        for event in backlog:
            self.apply(event)

    @property
    def server_panel(self) -> ServerPanel:
        """The Server panel."""
        return self.query_one(ServerPanel)

    @property
    def form(self) -> FlagForm:
        """The flags form."""
        return self.query_one(FlagForm)

    @property
    def board(self) -> ResultsBoard:
        """The results board."""
        return self.query_one(ResultsBoard)

    # -- session events ---------------------------------------------------------------------
    def apply(self, event: SessionEvent) -> None:
        """Route one session event to the widget that shows it."""
        if self._backlog is not None:
            self._backlog.append(event)
            return
        if isinstance(event, GpuSample):
            self.query_one(GpuPanel).sample = event
        elif isinstance(event, HostSample):
            self.query_one(GpuPanel).host = event
        elif isinstance(event, ServerMetrics):
            self.query_one(MetricsPanel).metrics = event
            title = self._telemetry.server_title(event)
            if title is not None:
                self.server_panel.border_title = title
        elif isinstance(event, LoadProgress):
            self.query_one(LoadPanel).show_progress(event)
        elif isinstance(event, LoadFinished):
            self.query_one(LoadPanel).show_finished(event.result, event.error)
            if event.error:
                self.notify(event.error, title="Load failed", severity="error")
        elif isinstance(event, SweepUpdated):
            self._sweep_updated(event)
        elif isinstance(event, TelemetryStatus):
            self._telemetry.show(event, self.query_one(GpuPanel), self.query_one(MetricsPanel))
        elif isinstance(event, RunUpdated):
            self.board.show(list(self.session.runs))
            current = self.session.current
            if current is not None and current.id == event.record.id:
                self._refresh_view()
        else:
            self._server_event(event)

    def _server_event(self, event: ServerEvent) -> None:
        if isinstance(event, LogLine):
            self.server_panel.tail.write(event.text)
            return
        if isinstance(event, Launched):
            self.server_panel.tail.set_lines([])
            self.query_one(LoadPanel).clear()
            self._launched_at = self._clock() if self._clock else None
            self._pid = event.pid
        elif isinstance(event, Ready):
            self.notify(f"Ready after {event.elapsed:.1f}s: b runs the load.", title="Server up")
        elif isinstance(event, Failed):
            fixes = event.diagnosis.fixes
            hint = f"\nf applies and restarts: {fixes[0].title}" if fixes else ""
            self.notify(
                event.diagnosis.summary + hint, title="Start failed", severity="error", timeout=10
            )
        self._refresh_view()

    def _refresh_view(self) -> None:
        """The Server panel as the current record and the live state say now."""
        since = None
        if self._clock is not None and self._launched_at is not None:
            since = self._clock() - self._launched_at
        view = project(self.session.current, self.session.state, pid=self._pid, since_launch=since)
        self._view = view
        self.server_panel.view = view

    def _tick(self) -> None:
        """Once a second while a server starts: how long it has been starting."""
        if self._view.state is ServerState.STARTING:
            self._refresh_view()

    @on(FlagForm.Validated)
    def _preflight(self, message: FlagForm.Validated) -> None:
        self._check_flags(message.flags)

    # An exclusive worker: each keystroke cancels the check still running for the one before,
    # and typing never waits on it (the session runs the check itself off the loop).
    @work(group="preflight", exclusive=True, exit_on_error=False, description="pre-flight")
    async def _check_flags(self, flags: ServeFlags | None) -> None:
        warnings: list[str] = []
        if flags is not None:
            try:
                warnings = await self.session.preflight(flags)
            except Exception as exc:  # a pre-flight check must never break the form
                warnings = [f"pre-flight check failed: {one_line(exc)}"]
        self.form.show_warnings(warnings)

    # -- commands ---------------------------------------------------------------------------
    def _run(self, what: str, job: Callable[[], Awaitable[object]], group: str) -> None:
        """Run a session command in a worker; a failure becomes a notification."""

        async def guarded() -> None:
            try:
                await job()
            except Exception as exc:  # the console reports (one line) and stays up
                self.notify(one_line(exc), title=f"{what} failed", severity="error", timeout=10)

        self.run_worker(guarded(), group=group, exit_on_error=False, description=what)

    def action_restart(self) -> None:
        """Validate the form; if it holds, restart the server with it."""
        if self._sweep_refuses("r"):
            return
        if not self.session.can_restart:
            self.notify(
                "Attached to a server this console did not start: it cannot restart it.",
                severity="warning",
            )
            return
        flags, problems = self.form.validate_flags()
        if flags is None:
            name = self.form.first_problem_field(problems)
            if name is not None:
                self.form.focus_field(name)
            self.notify(
                _problem_summary(problems), title="Not restarted: invalid flags", severity="error"
            )
            return
        if self._restarting:
            self.notify("A restart is already under way.", severity="warning")
            return

        async def restart() -> None:
            self._restarting = True
            try:
                await self.session.restart(flags)
            finally:
                self._restarting = False

        self._run("Restart", restart, "restart")

    def action_bench(self) -> None:
        """Run the form's workload, if the server is ready."""
        if self._sweep_refuses("b"):
            return
        state = self.session.state
        if state is not ServerState.READY:
            self.notify(
                f"The server is {state.value}; b needs it ready (r starts it).",
                title="No load run",
                severity="warning",
            )
            return
        if self._loading:
            self.notify("A load is already running (c cancels it).", severity="warning")
            return
        spec, problems = self.form.validate_workload()
        if spec is None:
            name = self.form.first_problem_field(problems, prefix="load-")
            if name is not None:
                self.form.focus_field(name)
            self.notify(
                _problem_summary(problems), title="No load run: invalid workload", severity="error"
            )
            return
        self.query_one(LoadPanel).start(spec)

        async def run_load() -> None:
            self._loading = True
            try:
                await self.session.run_load(spec)
            finally:
                self._loading = False

        self._run("Load", run_load, "load")

    def action_fix(self) -> None:
        """One-key fix: the latest failure's next untried fix into the form, then restart.

        Stops, and says why, when the last fix did not help (the same cause again) or
        every fix was tried (``tui.domain.fix_loop``): ``f`` never loops.
        """
        if self._sweep_refuses("f"):
            return
        choice = choose_fix(list(self.session.runs))
        if choice.fix is None or choice.run is None:
            self.notify(choice.reason, title="No fix applied", severity="warning", timeout=10)
            return
        fix = choice.fix
        self.form.apply_settings(fix.set)
        settings = ", ".join(f"{k}={format_value(v)}" for k, v in fix.set.items())
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

    def action_history(self) -> None:
        """The last minutes of every chart, every GPU, the advice in full."""
        self.app.push_screen(self._telemetry.history_screen(self.query_one(GpuPanel)))

    def action_cancel_load(self) -> None:
        """Cancel the running load."""
        if not self._loading:
            self.notify("No load is running.", severity="warning")
            return
        self._run("Cancel", self.session.cancel_load, "cancel")

    def action_stop_server(self) -> None:
        """Stop the server this console started."""
        if not self.session.can_restart:
            self.notify(
                "Attached to a server this console did not start: it will not stop it.",
                severity="warning",
            )
            return
        self._run("Stop", self.session.stop_server, "stop")

    def action_help(self) -> None:
        """Show the keys and what each panel shows."""
        self.app.push_screen(HelpScreen())

    def action_leave_field(self) -> None:
        """Esc in a form field: focus the board, so letter keys act again."""
        if isinstance(self.focused, Input | Select):
            self.board.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Esc (leave the field) is offered, and shown in the key bar, only in a field."""
        if action == "leave_field":
            return isinstance(self.focused, Input | Select)
        return True

    # -- the board and the form ------------------------------------------------------------
    @on(ResultsBoard.LoadIntoForm)
    def _load_run(self, message: ResultsBoard.LoadIntoForm) -> None:
        """Put a run's flags (and the workload it ran) into the form."""
        run = message.run
        self.form.load_flags(run.flags)
        if run.workload is not None:
            self.form.load_workload(run.workload)
        what = "flags and workload" if run.workload is not None else "flags"
        shown = "" if self.form.display else " (t shows the form)"
        self.notify(f"r restarts with them{shown}.", title=f"{run_label(run)}'s {what} loaded")

    def action_save_preset(self) -> None:
        """Ask a name, then save the form's flags and workload as one of the user's presets."""
        flags, problems = self.form.validate_flags()
        if flags is None:
            self.notify(_problem_summary(problems), title="Not saved: invalid flags",
                        severity="error")  # fmt: skip
            return
        workload, _ = self.form.validate_workload()
        based_on = self.form.chosen_preset

        def save(name: str | None) -> None:
            if name is None:
                return
            preset = preset_from_form(name, flags, workload, based_on=based_on,
                                      machine=self.session.info.label)  # fmt: skip

            async def write() -> None:
                path = await self.session.tools.save_preset(preset)
                self.form.add_preset(preset)
                self.notify(str(path), title=f"Preset {preset.name} saved")

            self._run("Save preset", write, "preset")

        hint = "letters, digits, - _ . · a preset of the same name is replaced"
        suggestion = f"{based_on.name}-mine" if based_on is not None else ""
        self.app.push_screen(AskScreen("Save the form as preset", suggestion, hint=hint,
                                       check=check_preset_name), save)  # fmt: skip
