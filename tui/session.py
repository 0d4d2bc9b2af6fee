"""The tuning loop as services: restart a server with flags, watch it, load it, keep every run.

``Session`` wires the rooms together for the console and for headless commands alike: the
``Supervisor`` (server/), the ``LoadRunner`` (load/), the telemetry pollers (telemetry/) and
the ``RunStore`` (store/). It imports no textual: the UI subscribes to its events.

Every run becomes a ``RunRecord`` in the store the moment it launches, then is updated in
place as it becomes ready, fails (with its diagnosis), or gets a load result.

A session may also start with a server it did not launch (an ``ExistingServer``): one at a
URL (``vtc --attach``: watched and loaded, never restarted or stopped), or one a previous
console launched and left running (adopted through the state file). A server this session
launches is recorded in that state file, so a hang-up can :meth:`Session.detach` from it
and the next ``vtc`` adopt it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tui.domain.events import (
    Exited,
    Failed,
    KvCacheReported,
    Launched,
    LogLine,
    Ready,
    ServerEvent,
    ServerState,
    StageReached,
)
from tui.domain.flags import ServeFlags
from tui.domain.preflight import KvEstimate
from tui.domain.presets import Preset
from tui.domain.results import (
    BenchResult,
    RunRecord,
    RunStatus,
    StageTiming,
    StartupProfile,
    TelemetryPeaks,
)
from tui.domain.telemetry import GpuSample, HostSample, ServerMetrics, SourceStatus
from tui.domain.vllm_cli import VllmCli
from tui.domain.workload import LoadProgress, LoadSpec
from tui.store.history import RunStore

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunUpdated:
    """A run record was created or changed (status, startup profile, diagnosis, bench)."""

    record: RunRecord


@dataclass(frozen=True)
class LoadFinished:
    """A load run ended: its result, or why there is none."""

    result: BenchResult | None
    error: str | None = None


SessionEvent = (
    ServerEvent | RunUpdated | LoadProgress | LoadFinished | GpuSample | ServerMetrics | HostSample
)


class SupervisorLike(Protocol):
    """What the session needs of ``tui.server.supervisor.Supervisor`` (a fake in tests)."""

    @property
    def state(self) -> ServerState: ...
    @property
    def pid(self) -> int | None: ...
    @property
    def base_url(self) -> str | None: ...
    @property
    def log_lines(self) -> Sequence[str]: ...
    async def start(self, flags: ServeFlags, extra_launch_args: Sequence[str] = ()) -> None: ...
    async def stop(self) -> None: ...
    async def detach(self) -> bool: ...


class ExistingServer(SupervisorLike, Protocol):
    """A server already running when the session starts, watched instead of launched.

    ``tui.server.attached.AttachedServer`` (a URL) or ``tui.server.adopted.AdoptedServer``
    (left running by a previous console). ``connect`` takes a first look without events;
    ``watch`` then reports it (``Ready``...) like a supervisor; ``aclose`` stops watching
    and never stops the server.
    """

    @property
    def label(self) -> str: ...
    @property
    def run_id(self) -> int | None: ...
    async def connect(self) -> ServeFlags: ...
    def watch(self) -> None: ...
    async def aclose(self) -> None: ...


class ServerStateLike(Protocol):
    """Keeps the state file of the launched server (``tui.server.adopted.ServerStateKeeper``)."""

    def holds(self, pid: int) -> bool: ...
    def record(
        self,
        *,
        pid: int,
        argv: Sequence[str],
        base_url: str,
        flags: ServeFlags | None,
        log_path: str | None,
        run_id: int | None,
    ) -> bool: ...
    def release(self, pid: int) -> bool: ...
    def forget(self, pid: int | None) -> None: ...


class LoadRunnerLike(Protocol):
    """What the session needs of ``tui.load.runner.LoadRunner``."""

    async def run(
        self,
        spec: LoadSpec,
        *,
        base_url: str,
        model: str,
        on_progress: Callable[[LoadProgress], None] | None = None,
    ) -> BenchResult: ...
    async def cancel(self) -> object: ...


class PollerLike(Protocol):
    """A started/stopped periodic sampler (``tui.telemetry.poller.Poller``)."""

    def start(self) -> None: ...
    async def stop(self) -> None: ...


@dataclass
class LaunchConfig:
    """How this session launches servers.

    ``command`` is the executable prefix (``["vllm"]``, a venv's vllm, or the simulator);
    the argv is ``[*command, "serve", *flags.to_argv(), *launch_args]``. ``env`` carries
    secrets such as ``VLLM_API_KEY``/``HF_TOKEN``: never argv.
    """

    command: list[str]
    launch_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    log_dir: Path = Path(".")
    mode_label: str = ""
    startup_timeout_s: float = 900.0
    grace_s: float = 10.0


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def simulator_command() -> list[str]:
    """The simulator, run by this same Python (no reliance on PATH)."""
    return [sys.executable, "-m", "tui.sim"]


SupervisorFactory = Callable[[Callable[[ServerEvent], None]], SupervisorLike]
ExistingServerFactory = Callable[[Callable[[ServerEvent], None]], ExistingServer]
MetricsPollerFactory = Callable[[str, Callable[[ServerMetrics], None]], PollerLike]
HostPollerFactory = Callable[[Callable[[], int | None], Callable[[HostSample], None]], PollerLike]
GpuPollerFactory = Callable[[Callable[[GpuSample], None]], PollerLike]


class Session:
    """One operator's tuning loop: a server at a time, a board of runs, live telemetry."""

    def __init__(
        self,
        *,
        launch: LaunchConfig,
        store: RunStore,
        presets: Sequence[Preset],
        initial_flags: ServeFlags,
        initial_load: LoadSpec,
        supervisor_factory: SupervisorFactory,
        load_runner_factory: Callable[[], LoadRunnerLike],
        metrics_poller_factory: MetricsPollerFactory | None = None,
        gpu_poller_factory: GpuPollerFactory | None = None,
        host_poller_factory: HostPollerFactory | None = None,
        gpu_from_server_metrics: bool = False,
        autostart: bool = False,
        can_restart: bool = True,
        initial_preset: str | None = None,
        estimator: Callable[[ServeFlags], KvEstimate | None] | None = None,
        vllm_cli_loader: Callable[[], VllmCli] | None = None,
        gpu_release: Callable[[set[int]], Awaitable[str | None]] | None = None,
        existing_server: ExistingServerFactory | None = None,
        server_state: ServerStateLike | None = None,
        notices: Sequence[str] = (),
    ) -> None:
        self.launch = launch
        self.store = store
        self.presets = list(presets)
        self.initial_flags = initial_flags
        self.initial_load = initial_load
        self.initial_preset = initial_preset  # the preset the form starts from, if any
        self.mode_label = launch.mode_label
        self.can_restart = can_restart
        self.runs: list[RunRecord] = store.list()
        self.current: RunRecord | None = None
        self.port = free_port() if initial_flags.port is None else initial_flags.port
        self._listeners: list[Callable[[SessionEvent], None]] = []
        self.notices = list(notices)  # for the operator at startup (e.g. a stale state file)
        # A server already running is watched first (one time); every launch gets a fresh
        # supervisor from the factory.
        self._supervisor_factory = supervisor_factory
        self._existing = existing_server(self._on_server_event) if existing_server else None
        self._supervisor: SupervisorLike = self._existing or supervisor_factory(
            self._on_server_event
        )
        self._server_state = server_state
        self._server_flags: ServeFlags | None = None  # what the current server runs with
        self._detached = False
        self._runner_factory = load_runner_factory
        self._runner: LoadRunnerLike | None = None
        self._metrics_poller_factory = metrics_poller_factory
        self._metrics_poller: PollerLike | None = None
        self._gpu_poller_factory = gpu_poller_factory
        self._gpu_poller: PollerLike | None = None
        self._host_poller_factory = host_poller_factory
        self._host_poller: PollerLike | None = None
        self._gpu_from_server = gpu_from_server_metrics
        self._autostart = autostart
        self._peaks: dict[str, float] = {}
        self._loading = False
        self._closed = False
        self._estimator = estimator
        # The installed vLLM's flags (tui.server.introspect): slow the first time (~10-30 s,
        # it imports vLLM), cached per version after that, so it loads in the background.
        self._vllm_cli_loader = vllm_cli_loader
        # Waits (bounded) until the GPU no longer lists a stopped server's processes.
        self._gpu_release = gpu_release
        self._vllm_cli_task: asyncio.Task[VllmCli | None] | None = None
        self.vllm_cli: VllmCli | None = None
        self.vllm_cli_error: str | None = None

    # -- observation --------------------------------------------------------------------------
    @property
    def state(self) -> ServerState:
        """The current server's lifecycle state."""
        return self._supervisor.state

    @property
    def log_lines(self) -> Sequence[str]:
        """The current server's log tail."""
        return self._supervisor.log_lines

    @property
    def base_url(self) -> str | None:
        """``http://host:port`` of the current server, once launched."""
        return self._supervisor.base_url

    @property
    def pid(self) -> int | None:
        """The current server's pid (``None`` before a launch, and for an attached server)."""
        return self._supervisor.pid

    @property
    def detached(self) -> bool:
        """True once :meth:`detach` left the server running for the next console."""
        return self._detached

    @property
    def load_running(self) -> bool:
        """Whether a load run is in progress."""
        return self._loading

    def subscribe(self, callback: Callable[[SessionEvent], None]) -> None:
        """Deliver every session event to ``callback`` (on the session's event loop)."""
        self._listeners.append(callback)

    def _emit(self, event: SessionEvent) -> None:
        for listener in list(self._listeners):
            listener(event)

    def preflight(self, flags: ServeFlags) -> list[str]:
        """Warnings about ``flags`` before launch, the KV estimate's included (when injected)."""
        warnings = []
        if flags.enable_chunked_prefill is False and flags.max_num_batched_tokens is None:
            warnings.append(
                "chunked prefill off: vLLM raises max_num_batched_tokens to max_model_len"
            )
        estimate = self._estimator(flags) if self._estimator is not None else None
        if estimate is not None:
            warnings.extend(estimate.warnings)
        if self.vllm_cli is not None:
            # one warning per option the installed vLLM would reject (exit 2 before startup)
            warnings.extend(p.message for p in self.vllm_cli.problems(flags.to_argv()))
        return warnings

    async def load_vllm_cli(self) -> VllmCli | None:
        """Ask the installed vLLM for its flags (in a worker thread); ``None`` if unavailable."""
        if self._vllm_cli_loader is None:
            return None
        try:
            self.vllm_cli = await asyncio.to_thread(self._vllm_cli_loader)
        except Exception as exc:  # IntrospectError: the console works without the flag list
            self.vllm_cli_error = str(exc).splitlines()[0]
        return self.vllm_cli

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start telemetry pollers, and the first server when the mode autostarts."""
        if self._gpu_poller_factory is not None and not self._gpu_from_server:
            self._gpu_poller = self._gpu_poller_factory(self._on_gpu)
            self._gpu_poller.start()
        if self._host_poller_factory is not None:
            self._host_poller = self._host_poller_factory(
                lambda: self._supervisor.pid, self._on_host
            )
            self._host_poller.start()
        if self._gpu_from_server:
            self._on_gpu(self._simulated_gpu_down())
        if self._vllm_cli_loader is not None:
            self._vllm_cli_task = asyncio.create_task(self.load_vllm_cli())
        if self._existing is not None:
            await self._take_over(self._existing)
        elif self._autostart and self.can_restart:
            await self.restart(self.initial_flags)

    async def _take_over(self, server: ExistingServer) -> None:
        """Make the already-running server current: its stored run, or a new card."""
        flags = await server.connect()
        self._server_flags = flags
        record = next((r for r in self.runs if r.id is not None and r.id == server.run_id), None)
        if record is None:
            status = {
                ServerState.READY: RunStatus.READY,
                ServerState.STARTING: RunStatus.STARTING,
            }.get(server.state, RunStatus.STOPPED)
            record = self.store.add(
                RunRecord(
                    flags=flags, label=server.label, status=status, executable=server.base_url or ""
                )
            )
            self.runs.append(record)
        self.current = record
        self._peaks = {}
        self._emit(RunUpdated(record))
        server.watch()

    async def restart(self, flags: ServeFlags) -> RunRecord:
        """Stop what runs (load first, then the server) and launch ``flags`` as a new run.

        Returns as soon as the process is launched; readiness or failure arrive as events
        and as updates of the returned run.
        """
        if not self.can_restart:
            raise RuntimeError("attached to a server this console did not start: restart disabled")
        await self.cancel_load()
        old_pids = self._server_pids()
        await self.stop_server()
        if self._gpu_release is not None and old_pids:
            message = await self._gpu_release(old_pids)
            if message:
                self._emit(LogLine(f"[vtc] {message}"))
        if self._supervisor is self._existing:  # an adopted server: launches are supervised
            self._supervisor = self._supervisor_factory(self._on_server_event)
        estimate: KvEstimate | None = None
        if self._estimator is not None:  # after the stop: the old server's memory is free
            try:
                estimate = self._estimator(flags)
            except Exception:  # an estimate is advice: it must never block a launch
                estimate = None
        record = self.store.add(
            RunRecord(
                flags=flags,
                executable=" ".join(self.launch.command),
                startup=StartupProfile(
                    kv_estimate_tokens=estimate.kv_tokens if estimate is not None else None
                ),
            )
        )
        self.runs.append(record)
        self.current = record
        self._peaks = {}
        self._emit(RunUpdated(record))
        launch_flags = flags if flags.port is not None else flags.replace(port=self.port)
        self._server_flags = launch_flags
        await self._supervisor.start(launch_flags, self.launch.launch_args)
        return self.current

    def _server_pids(self) -> set[int]:
        """The pids of the current server's tree, while it runs (for the GPU release wait)."""
        if self._supervisor.state not in (ServerState.STARTING, ServerState.READY):
            return set()
        pids = {p.pid for p in getattr(self._supervisor, "known_processes", ())}
        if self._supervisor.pid is not None:
            pids.add(self._supervisor.pid)
        return pids

    async def stop_server(self) -> None:
        """Stop the current server (cancelling load first) and its telemetry."""
        await self.cancel_load()
        await self._stop_metrics()
        if self._supervisor.state in (ServerState.STARTING, ServerState.READY):
            await self._supervisor.stop()

    async def close(self) -> None:
        """Stop load, the server this session started (or adopted), and every poller.

        An attached server (``can_restart`` False) is only no longer watched.
        """
        if self._closed:
            return
        self._closed = True
        if self._vllm_cli_task is not None:
            self._vllm_cli_task.cancel()  # the worker thread finishes on its own (<= timeout)
        if self.can_restart:
            await self.stop_server()
        else:
            await self.cancel_load()
            await self._stop_metrics()
        await self._stop_watching()
        self.store.close()

    async def detach(self) -> bool:
        """Leave the server running for the next ``vtc`` (the terminal hung up).

        Stops load, telemetry and the watching, keeps the server and its state file (now
        naming no console), and returns True. A server that could not be reattached (none
        recorded in a state file, or not running) is stopped as :meth:`close` would, and
        False is returned. After a detach, :meth:`close` and :meth:`abandon` do nothing.
        """
        if self._closed:
            return self._detached
        pid = self._supervisor.pid
        keeper = self._server_state
        if (
            keeper is None
            or pid is None
            or self.state not in (ServerState.STARTING, ServerState.READY)
            or not keeper.holds(pid)
        ):
            await self.close()
            return False
        self._closed = True
        if self._vllm_cli_task is not None:
            self._vllm_cli_task.cancel()
        await self.cancel_load()
        await self._stop_metrics()
        if await self._supervisor.detach():
            self._detached = True
            keeper.release(pid)
        else:  # it cannot be left running safely (it ended meanwhile): stop what is left
            await self.stop_server()
        await self._stop_watching()
        self.store.close()
        return self._detached

    async def _stop_watching(self) -> None:
        for poller in (self._gpu_poller, self._host_poller):
            if poller is not None:
                await poller.stop()
        if self._existing is not None:
            await self._existing.aclose()

    def abandon(self) -> None:
        """Last resort once the event loop is gone (a crash): SIGKILL the server's group.

        The server runs in its own session, so its group id is its pid; orphaned
        EngineCore/Worker processes stay in that group and go with it. Nothing happens
        after a :meth:`detach` (the server was left running on purpose).
        """
        if self._detached:
            return
        pid = self._supervisor.pid
        if pid is None or self._supervisor.state not in (
            ServerState.STARTING,
            ServerState.READY,
            ServerState.STOPPING,
        ):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)

    # -- load -----------------------------------------------------------------------------------
    async def run_load(self, spec: LoadSpec) -> BenchResult | None:
        """Run ``spec`` against the ready server; the result lands on the current run."""
        if self.state is not ServerState.READY or self.current is None or self.base_url is None:
            raise RuntimeError(f"the server is {self.state.value}, not ready: start it with r")
        if self._loading:
            raise RuntimeError("a load run is already in progress")
        record = self.current
        model = record.flags.served_model_name or record.flags.model
        self._runner = self._runner_factory()
        self._loading = True
        self._peaks = {}
        try:
            result = await self._runner.run(
                spec, base_url=self.base_url, model=model, on_progress=self._emit
            )
        except Exception as exc:  # the load generator reports, the console keeps going
            self._emit(LoadFinished(None, error=f"{type(exc).__name__}: {exc}"))
            return None
        finally:
            self._loading = False
            self._runner = None
        cancelled = result.cancelled
        current = self.current
        if not (cancelled and current is not None and current.bench is not None):
            # A cancelled run's partial numbers never replace a completed result on the card.
            self._update(
                bench=result,
                workload=spec,
                peaks=TelemetryPeaks(**self._peaks),
            )
        self._emit(LoadFinished(result))
        return result

    async def cancel_load(self) -> None:
        """Cancel every in-flight stream of the running load, keeping partial results."""
        runner = self._runner
        if runner is not None:
            await runner.cancel()

    # -- internals ------------------------------------------------------------------------------
    def _update(self, **changes: Any) -> None:
        if self.current is None:
            return
        record = self.current.model_copy(update=changes)
        self.current = record
        self.runs = [record if r.id == record.id else r for r in self.runs]
        self.store.update(record)
        self._emit(RunUpdated(record))

    def _on_server_event(self, event: ServerEvent) -> None:
        record = self.current
        if record is not None:
            startup = record.startup
            if isinstance(event, Launched):
                self._update(log_path=event.log_path)
                self._record_server(event, record)
            elif isinstance(event, StageReached):
                stages = list(startup.stages)
                if stages and stages[-1].seconds is None:
                    last = stages[-1]
                    stages[-1] = last.model_copy(
                        update={"seconds": event.elapsed - last.started_at}
                    )
                stages.append(
                    StageTiming(
                        name=event.stage.value, started_at=event.elapsed, detail=event.detail
                    )
                )
                self._update(startup=startup.model_copy(update={"stages": stages}))
            elif isinstance(event, KvCacheReported):
                self._update(
                    startup=startup.model_copy(
                        update={
                            "kv_cache_tokens": event.tokens,
                            "max_concurrency": event.max_concurrency,
                        }
                    )
                )
            elif isinstance(event, Ready):
                changes: dict[str, Any] = {}
                if self._supervisor is not self._existing:  # else: not a start we timed
                    changes["seconds_to_ready"] = event.elapsed
                if event.kv_cache_tokens is not None:
                    changes["kv_cache_tokens"] = event.kv_cache_tokens
                if event.max_concurrency is not None:
                    changes["max_concurrency"] = event.max_concurrency
                self._update(status=RunStatus.READY, startup=startup.model_copy(update=changes))
                self._start_metrics()
            elif isinstance(event, Failed):
                self._update(
                    status=RunStatus.FAILED, diagnosis=event.diagnosis, exit_code=event.exit_code
                )
            elif isinstance(event, Exited):
                self._update(exit_code=event.exit_code)
                if record.status is RunStatus.STARTING:
                    self._update(status=RunStatus.STOPPED)
        if isinstance(event, Failed | Exited) and self._server_state is not None:
            self._server_state.forget(self._supervisor.pid)
        self._emit(event)

    def _record_server(self, event: Launched, record: RunRecord) -> None:
        """Write the state file that lets a later ``vtc`` reattach (or ``vtc stop``)."""
        if self._server_state is None or self.base_url is None:
            return
        try:
            recorded = self._server_state.record(
                pid=event.pid,
                argv=event.argv,
                base_url=self.base_url,
                flags=self._server_flags,
                log_path=event.log_path,
                run_id=record.id,
            )
        except OSError as exc:  # a convenience: it must never break a launch
            logger.warning("cannot write the server state file: %s", exc)
            return
        if not recorded:
            logger.info("state file names another running server: pid %s not recorded", event.pid)

    def _start_metrics(self) -> None:
        if (
            self._metrics_poller_factory is None
            or self.base_url is None
            or self._metrics_poller is not None  # an attached server came back: still polling
        ):
            return
        self._metrics_poller = self._metrics_poller_factory(self.base_url, self._on_metrics)
        self._metrics_poller.start()

    async def _stop_metrics(self) -> None:
        poller, self._metrics_poller = self._metrics_poller, None
        if poller is not None:
            await poller.stop()

    def _peak(self, key: str, value: float | None) -> None:
        if value is not None and self._loading:
            self._peaks[key] = max(self._peaks.get(key, value), value)

    def _on_metrics(self, sample: ServerMetrics) -> None:
        self._peak("kv_cache_usage", sample.kv_cache_usage)
        self._peak("num_waiting", sample.num_waiting)
        self._peak("generation_tokens_per_s", sample.generation_tokens_per_s)
        self._emit(sample)
        if self._gpu_from_server:
            if sample.gpu is not None:
                self._on_gpu(sample.gpu)
            elif sample.status is not SourceStatus.OK:
                self._on_gpu(self._simulated_gpu_down())

    @staticmethod
    def _simulated_gpu_down() -> GpuSample:
        return GpuSample(
            t=time.monotonic(),
            source="simulated",
            status=SourceStatus.DOWN,
            message="simulated GPU: shown while the simulator runs",
        )

    def _on_gpu(self, sample: GpuSample) -> None:
        for dev in sample.devices:
            self._peak("gpu_util", dev.utilization)
            if dev.memory_used is not None:
                self._peak("gpu_mem_used_bytes", float(dev.memory_used))
        self._emit(sample)

    def _on_host(self, sample: HostSample) -> None:
        self._peak(
            "server_rss_bytes", None if sample.server_rss is None else float(sample.server_rss)
        )
        self._emit(sample)


async def wait_for_state(session: Session, states: set[ServerState], timeout: float) -> ServerState:
    """Wait until the session's server reaches one of ``states`` (headless commands, tests)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while session.state not in states:
        if loop.time() > deadline:
            raise TimeoutError(f"server still {session.state.value} after {timeout:.0f} s")
        await asyncio.sleep(0.05)
    return session.state
