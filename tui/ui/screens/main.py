"""The main screen: every panel at once, the keys, and the routing of session events."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Input, Select

from tui.domain.board.baseline import run_label
from tui.domain.errors import VtcError, one_line
from tui.domain.events import (
    Failed,
    Launched,
    LogLine,
    Ready,
    ServerEvent,
    ServerState,
    Unanswered,
)
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import RunRecord, RunStatus
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
from tui.ui import board_messages
from tui.ui.attached_form import AttachedForm
from tui.ui.form_keeper import FormKeeper
from tui.ui.format import plain
from tui.ui.keys import BAR_WIDTHS, offered, screen_bindings
from tui.ui.run_requests import export_run, repeat_run
from tui.ui.screen_keeper import open_screen
from tui.ui.screens.capacity import open_capacity
from tui.ui.screens.help import show_help
from tui.ui.screens.loop_keys import LoopKeys
from tui.ui.screens.run_detail import RunDetailScreen
from tui.ui.server_view import project
from tui.ui.sweep_controller import SweepController
from tui.ui.telemetry_control import TelemetryControl
from tui.ui.twin_controller import TwinController
from tui.ui.widgets.flag_form import FlagForm
from tui.ui.widgets.flag_search import CliStatus, cli_status
from tui.ui.widgets.gpu_panel import GpuPanel
from tui.ui.widgets.key_bar import KeyBar
from tui.ui.widgets.load_panel import LoadPanel
from tui.ui.widgets.metrics_panel import MetricsPanel
from tui.ui.widgets.results_board import ResultsBoard
from tui.ui.widgets.server_panel import ServerPanel
from tui.ui.workers import run_guarded

Clock = Callable[[], float]


class MainScreen(LoopKeys, Screen[None]):
    """Server, GPU, Metrics and Load on top; the flags form and the results board below."""

    BINDINGS: ClassVar[list[BindingType]] = screen_bindings()
    # The board takes focus first, so the letter keys act at once; Tab reaches the form.
    AUTO_FOCUS = "#board-focus"
    # Screen declares these as plain annotations, so no ClassVar here (mypy would object).
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]  # noqa: RUF012
    VERTICAL_BREAKPOINTS = [(0, "-short"), (34, "-tall")]  # noqa: RUF012

    def __init__(self, session: SessionPort, *, clock: Clock | None = None) -> None:
        super().__init__()
        self.session = session
        self._clock = clock
        self._launched_at: float | None = None
        self._pid: int | None = None  # live: the record does not keep the process id
        self._silence: Unanswered | None = None  # live: READY but /health unanswered
        self._view = project(session.current, session.state, url=session.base_url)
        self._sweeps = SweepController(self, session, lambda: self.form, self._board_baseline)
        self._kept_form = FormKeeper(self, session, lambda: self.form)
        self._twin = TwinController(self, session)
        # Events that arrive before the panels exist (the session may start talking first).
        self._backlog: list[SessionEvent] | None = []
        self._telemetry = TelemetryControl(session, live=clock is not None)
        self._attached = AttachedForm(session)  # attach mode: the server's flags, read-only

    # -- layout -----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        """All panels on one screen (no tabs): narrow terminals get compact panels."""
        yield ServerPanel(id="server", classes="panel")
        with Horizontal(id="strip"):
            yield GpuPanel(self.session.history, id="gpu", classes="panel")
            yield MetricsPanel(
                self.session.history,
                can_apply=offered("apply_advice", can_launch=self.session.can_restart),
                id="metrics",
                classes="panel",
            )
            yield LoadPanel(self.session.info.initial_load, id="load", classes="panel")
        with Horizontal(id="work"):
            yield FlagForm(
                self.session.info.initial_flags,
                self.session.info.initial_load,
                list(self.session.info.presets),
                initial_preset=self.session.info.initial_preset,
                cli_status=self.cli_status,
                id="form",
                classes="panel",
            )
            yield ResultsBoard(can_launch=self.session.can_restart, id="board", classes="panel")
        yield KeyBar()

    def cli_status(self) -> CliStatus:
        """The installed vLLM's flag list as the session has it now (it loads after start)."""
        session = self.session
        return cli_status(session.vllm_cli, session.vllm_cli_error, session.info.no_flag_list)

    def on_mount(self) -> None:
        """Titles, then what the session already knows (a late start shows the board)."""
        self.query_one("#server").border_title = f"Server · {plain(self.session.info.label)}"
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
        self._show_runs()
        self._restore_board()
        self._attached.refresh(self.form)
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
    def board(self) -> ResultsBoard:
        """The results board."""
        return self.query_one(ResultsBoard)

    def _board_baseline(self) -> RunRecord | None:
        """The run the board measures against now (a sweep's best is compared with it)."""
        board = self.board.board
        return board.baseline.run if board is not None and board.baseline is not None else None

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
            self._bar_changed()  # c applies now (the bar recomposes only if its keys change)
        elif isinstance(event, LoadFinished):
            self.query_one(LoadPanel).show_finished(event.result, event.error)
            self._bar_changed()
            if event.error:
                self.notify(event.error, title="Load failed", severity="error")
        elif isinstance(event, SweepUpdated):
            self._sweeps.updated(event)
        elif isinstance(event, TelemetryStatus):
            self._telemetry.show(event, self.query_one(GpuPanel), self.query_one(MetricsPanel))
        elif isinstance(event, RunUpdated):
            self._show_runs()
            self._bar_changed()
            current = self.session.current
            if current is not None and current.id == event.record.id:
                self._refresh_view()
                self._attached.refresh(self.form)
        else:
            self._server_event(event)

    def _server_event(self, event: ServerEvent) -> None:
        if isinstance(event, LogLine):
            self.server_panel.tail.write(event.text)
            return
        self._silence = event if isinstance(event, Unanswered) else None
        if isinstance(event, Launched):
            self.server_panel.tail.set_lines([])
            self.query_one(LoadPanel).clear()
            self._launched_at = self._clock() if self._clock else None
            self._pid = event.pid
        elif self._sweeps.running:
            pass  # a sweep's trials start and fail by the dozen: its screen shows each one
        elif isinstance(event, Ready):
            self._attached.refresh(self.form)
            self.notify(f"Ready after {event.elapsed:.1f}s: b runs the load.", title="Server up")
        elif isinstance(event, Failed):
            # The card on the board holds the diagnosis and its fixes: one short line here.
            hint = " · f applies its fix" if event.diagnosis.fixes else ""
            self.notify(f"its card says why{hint}", title="Start failed", severity="error")
        self._refresh_view()
        self._bar_changed()

    def _show_runs(self) -> None:
        """The board as the session's runs stand; the run serving now is marked live."""
        current = self.session.current
        ready = current is not None and self.session.state is ServerState.READY
        self.board.show(list(self.session.runs), live=current.id if ready and current else None)

    def _refresh_view(self) -> None:
        """The Server panel as the current record and the live state say now."""
        launched, clock = self._launched_at, self._clock
        since = clock() - launched if clock is not None and launched is not None else None
        can_stop = offered("stop_server", can_launch=self.session.can_restart)
        view = project(
            self.session.current,
            self.session.state,
            pid=self._pid,
            since_launch=since,
            silence=self._silence,
            can_stop=can_stop,
            url=self.session.base_url,
        )
        self._view = view
        self.server_panel.view = view

    def _tick(self) -> None:
        """Once a second while a server starts: how long it has been starting."""
        if self._view.state is ServerState.STARTING:
            self._refresh_view()

    @on(FlagForm.Validated)
    def _preflight(self, message: FlagForm.Validated) -> None:
        self._kept_form.changed(message.flags)  # for the next console
        if self.session.can_restart:  # attached: nothing launches, the form is what was read
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
        await self._twin.predict(flags)  # the twin's figures for the edited flags

    # -- commands ---------------------------------------------------------------------------
    def action_history(self) -> None:
        """The last minutes of every chart, every GPU, the advice in full."""
        open_screen(self.app, self._telemetry.history_screen(self.query_one(GpuPanel)))

    def action_calibrate(self) -> None:
        """Calibrate the twin of the ready server (``k``)."""
        self._twin.calibrate()

    def action_capacity(self) -> None:
        """The twin's capacity for the form's flags, the running ones and the baseline's."""
        open_capacity(self, self.session, self.form, self.board)

    def action_sweep(self) -> None:
        """Open the sweep screen, starting from the form's flags and workload."""
        self._sweeps.open()

    def jump_to_field(self, name: str) -> None:
        """Focus a form field (the palette's flag search), its value selected: typing
        replaces it; a flag the form does not declare gets a row of its own. In table view
        the form is hidden: back to cards first, and the field is scrolled into sight once
        the form is laid out again."""
        if self.board.table_mode:
            self.board.action_toggle_table()
        self.form.edit_flag(name)

    async def run_command(self, action: str) -> None:
        """Run a command as its key would (``board.`` actions: the board's)."""
        if action.startswith("board."):
            await self.board.run_action(action.removeprefix("board."))
        else:
            await self.run_action(action)

    def action_help(self) -> None:
        """Show the keys and what each panel shows."""
        show_help(self.app, can_launch=self.session.can_restart)

    def action_leave_field(self) -> None:
        """Esc in a form field: focus the board, so letter keys act again."""
        if isinstance(self.focused, Input | Select):
            self.board.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Esc only in a field; attached, no command that launches (``keys.LAUNCH_ACTIONS``)."""
        if action == "leave_field":
            return isinstance(self.focused, Input | Select)
        if action == "shown":  # the key bar's copy of a command: where the width allows
            shown = str(parameters[0])
            wide = self.size.width >= BAR_WIDTHS.get(shown, 10**6)
            return wide and offered(shown, can_launch=self.session.can_restart)
        return offered(action, can_launch=self.session.can_restart)

    async def action_shown(self, action: str) -> None:
        """A command pressed through its key-bar copy: as its own key."""
        await self.run_action(action)

    # -- the board and the form ------------------------------------------------------------
    def on_resize(self) -> None:
        """The key bar fits the keys to the new width (the board fits the form itself)."""
        self.refresh_bindings()

    def bar_applies(self, action: str) -> bool:
        """Whether ``action`` does something now (the key bar shows those first): a fix
        after a failed start, cancel while a load runs, bench and stop with a server."""
        state = self.session.state
        if action == "fix":
            runs = self.session.runs
            return bool(runs) and runs[-1].status is RunStatus.FAILED
        if action == "cancel_load":
            return self.session.load_running
        if action in ("bench", "stop_server", "calibrate"):
            return state in (ServerState.READY, ServerState.STARTING)
        return True

    def _bar_changed(self) -> None:
        """What the key bar shows first may have changed (it recomposes only if so)."""
        self.refresh_bindings()

    @on(ResultsBoard.LoadIntoForm)
    def _load_run(self, message: board_messages.LoadIntoForm) -> None:
        """Put a run's flags (and the workload it ran) into the form."""
        run = message.run
        self.form.load_flags(run.flags)
        if run.workload is not None:
            self.form.load_workload(run.workload)
        what = "flags and workload" if run.workload is not None else "flags"
        shown = "" if self.form.display else " (t shows the form)"
        self.notify(f"r restarts with them{shown}.", title=f"{run_label(run)}'s {what} loaded")

    @work(group="board-view", exit_on_error=False, description="board view")
    async def _restore_board(self) -> None:
        """The pin and view the last console left (read off the event loop)."""
        try:
            saved = await self.session.tools.saved_board()
        except VtcError:
            return  # unreadable: the board keeps its defaults
        self.board.restore(saved)

    @on(ResultsBoard.KeepView)
    def _keep_board(self, message: board_messages.KeepView) -> None:
        """Keep the pin and view for the next console and ``vtc runs``."""
        run_guarded(
            self, "Keep the board's view", lambda: self.session.tools.save_board(message.saved)
        )

    @on(ResultsBoard.ShowDetail)
    def _detail(self, message: board_messages.ShowDetail) -> None:
        """The run in full (its log read through the session's tools)."""
        open_screen(self.app, RunDetailScreen(message.board, message.row, self.session.tools))

    @on(ResultsBoard.RepeatRun)
    def _repeat(self, message: board_messages.RepeatRun) -> None:
        repeat_run(self, self.session.tools, message.run, message.times)

    @on(ResultsBoard.ExportRun)
    def _export(self, message: board_messages.ExportRun) -> None:
        export_run(self, self.session.tools, message.run, message.fmt)
