"""What the console needs of a session: its events and :class:`SessionPort`.

The console (``tui/ui``) imports this module and ``tui/domain`` only: never the services
behind the port. ``tui.session.Session`` implements the protocol; the UI tests' fake
session implements it too, and mypy checks both against it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tui.domain.advice import Advice
from tui.domain.board.saved import SavedBoard
from tui.domain.calibration import Progress
from tui.domain.capacity import CapacityAnswer
from tui.domain.errors import VtcError
from tui.domain.events import ServerEvent, ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.flags.vllm_cli import VllmCli
from tui.domain.freshness import Freshness
from tui.domain.history import TelemetryHistory
from tui.domain.log_tail import LogTail
from tui.domain.prediction import Prediction
from tui.domain.presets import Preset
from tui.domain.results import BenchResult, RunRecord, SweepTag
from tui.domain.saved_form import SavedForm
from tui.domain.server_config import ServerConfig
from tui.domain.sweep import SweepSpec, SweepStatus
from tui.domain.sweep.cluster import ClusterChoice
from tui.domain.sweep.slo import SloLimits
from tui.domain.telemetry import GpuSample, HostSample, ServerMetrics
from tui.domain.workload import LoadProgress, LoadSpec


@dataclass(frozen=True)
class RunUpdated:
    """A run record was created or changed (status, startup profile, diagnosis, bench)."""

    record: RunRecord


@dataclass(frozen=True)
class LoadFinished:
    """A load run ended: its result, or why there is none (one line)."""

    result: BenchResult | None
    error: str | None = None


@dataclass(frozen=True)
class SweepUpdated:
    """A sweep's status changed: a trial started or finished, it stopped or ended."""

    status: SweepStatus


@dataclass(frozen=True)
class TelemetryStatus:
    """Once a poll interval: how fresh each panel's data is, the server's GPUs, the advice.

    ``metrics``: ``None`` while no server is watched; ``host``: ``None`` where the mode reads
    no host (a server on another machine). ``server_gpus``: the indices of the GPUs the
    watched server runs on (empty: not known). ``advice``: what holds now, most urgent first.
    """

    gpu: Freshness
    metrics: Freshness | None = None
    host: Freshness | None = None
    server_gpus: frozenset[int] = frozenset()
    advice: tuple[Advice, ...] = ()


SessionEvent = (
    ServerEvent
    | RunUpdated
    | LoadFinished
    | LoadProgress
    | GpuSample
    | ServerMetrics
    | HostSample
    | SweepUpdated
    | TelemetryStatus
)
"""Everything a session reports to its subscribers, on its event loop, in order."""


class TwinControl(Protocol):
    """The twin of the watched server (``tui.twin.service`` implements it).

    Predictions run off the console's loop; every one carries its label (``predicted
    (twin NAME rN, ±E%)``). ``calibrating``: a calibration of the watched server runs.
    """

    @property
    def calibrating(self) -> bool: ...

    async def predict(self, flags: ServeFlags, load: LoadSpec) -> Prediction | None:
        """The twin's figures for ``flags`` and ``load`` (``None``: no profile fits)."""
        ...

    async def calibrate(self, name: str, on_progress: Callable[[Progress], None]) -> str:
        """Calibrate the watched server into profile ``name`` (it becomes the twin); one
        line saying what was saved."""
        ...

    async def capacity(
        self,
        flags: ServeFlags,
        load: LoadSpec,
        slos: SloLimits,
        *,
        target_rate: float | None = None,
        name: str = "current",
    ) -> CapacityAnswer:
        """The twin's capacity curve and highest rate for ``flags`` (named ``name``) under
        ``slos``, off the console's loop; ``VtcError`` (one line) without a profile."""
        ...


class LaunchWithdrawn(VtcError):
    """A restart's ``proceed`` said no once the old server was gone: nothing launched."""


class SweepControl(Protocol):
    """The sweeps a session runs on its own server (``tui.tune.service`` implements it).

    While one runs it drives the session as the operator would (restart, load), so the
    console refuses its own restarts and loads; its progress arrives as ``SweepUpdated``.
    """

    @property
    def status(self) -> SweepStatus | None:
        """The running or last sweep's status (``None`` before the first)."""
        ...

    @property
    def running(self) -> bool:
        """Whether a sweep is running (or stopping)."""
        ...

    def start(
        self,
        spec: SweepSpec,
        *,
        baseline_run_id: int | None = None,
        cluster: ClusterChoice | None = None,
    ) -> None:
        """Start ``spec`` (resuming its journal if it ran before) on this session's server, or
        on the Ray ``cluster``; ``VtcError`` if busy or when this console has no Ray."""
        ...

    async def stop(self) -> None:
        """Stop the running sweep (the trial in progress is cut short and run again later)."""
        ...

    async def resume(self, sweep_id: str, *, baseline_run_id: int | None = None) -> SweepSpec:
        """Resume the sweep ``sweep_id`` on the machine its trials were measured on (its
        spec); ``VtcError`` saying why not."""
        ...

    async def resumable(self) -> list[SweepSpec]:
        """Sweeps of this data dir that did not finish, newest first."""
        ...


@dataclass(frozen=True)
class SessionInfo:
    """What the mode decided for a session: fixed for its life.

    ``label`` names the mode in the console's header; ``port`` is where launched runs
    listen when their flags name none; ``protected_runs`` are stored runs still live under
    another console (never marked lost by this one); ``no_flag_list`` says why the
    installed vLLM's flag list will never load in this mode (``None``: it loads);
    ``sweeps``: the sweeps it can run on its server.
    """

    label: str
    initial_flags: ServeFlags
    initial_load: LoadSpec = field(default_factory=LoadSpec)
    presets: Sequence[Preset] = ()
    initial_preset: str | None = None
    notices: Sequence[str] = ()
    autostart: bool = False
    executable: str = "vllm"
    port: int = 8000
    protected_runs: frozenset[int] = frozenset()
    no_flag_list: str | None = None
    sweeps: SweepControl | None = None  # None: this mode runs no sweeps (attached)
    twin: TwinControl | None = None  # the twin of the watched server (predictions)


class SessionTools(Protocol):
    """What the board asks of the session about runs (``tui.session.tools`` implements it)."""

    async def repeat(self, run: RunRecord, times: int) -> list[RunRecord]:
        """Run ``run`` again ``times`` times: its flags, ready, its workload; the new runs."""
        ...

    async def export(self, run: RunRecord, fmt: str) -> Path:
        """Write ``run`` as ``fmt`` (command, yaml, compose, systemd, k8s) in the data dir."""
        ...

    async def save_preset(self, preset: Preset) -> Path:
        """Save ``preset`` among the user's presets; the file written."""
        ...

    async def log_tail(self, run: RunRecord) -> LogTail:
        """The end of ``run``'s server log file (bounded, read off the event loop)."""
        ...

    async def saved_board(self) -> SavedBoard:
        """The board's pin and view as the last console left them."""
        ...

    async def save_board(self, saved: SavedBoard) -> None:
        """Keep the board's pin and view for the next console and ``vtc runs``."""
        ...

    async def save_form(self, saved: SavedForm) -> None:
        """Keep the flags form (flags, workload, preset) for the next console."""
        ...


class ServerControl(Protocol):
    """The server and load commands every driver of a session uses (the console, a sweep's
    lane): its state, its run, restarts and loads, an event feed."""

    @property
    def current(self) -> RunRecord | None: ...
    @property
    def state(self) -> ServerState: ...

    def subscribe(self, callback: Callable[[SessionEvent], None]) -> None: ...
    async def restart(
        self,
        flags: ServeFlags,
        sweep: SweepTag | None = None,
        *,
        proceed: Callable[[], bool] | None = None,
    ) -> RunRecord: ...
    async def run_load(
        self,
        spec: LoadSpec,
        model: str | None = None,
        goodput: Mapping[str, float] | None = None,
    ) -> BenchResult | None: ...
    async def cancel_load(self) -> None: ...
    async def stop_server(self) -> None: ...


class SessionPort(ServerControl, Protocol):
    """The session as the console sees it: read-only state, commands, an event feed."""

    @property
    def info(self) -> SessionInfo: ...
    @property
    def can_restart(self) -> bool: ...
    @property
    def base_url(self) -> str | None:
        """Where the server this console watches answers (``None``: none yet)."""
        ...

    @property
    def runs(self) -> list[RunRecord]: ...
    @property
    def log_lines(self) -> Sequence[str]: ...
    @property
    def vllm_cli(self) -> VllmCli | None: ...
    @property
    def vllm_cli_error(self) -> str | None: ...
    @property
    def history(self) -> TelemetryHistory:
        """The panels' numbers over the last minutes (read-only for the console)."""
        ...

    @property
    def server_config(self) -> ServerConfig | None:
        """An attached server's configuration as read from it, each flag with its source
        (``None``: this console launches its servers, or nothing could be read yet)."""
        ...

    @property
    def tools(self) -> SessionTools: ...

    async def start(self) -> None: ...
    @property
    def load_running(self) -> bool:
        """Whether a load runs now (``run_load`` refuses a second one)."""
        ...

    async def close(self) -> None: ...
    async def detach(self) -> bool: ...
    async def preflight(self, flags: ServeFlags) -> list[str]:
        """Warnings about ``flags`` (runs its checks off the event loop)."""
        ...
