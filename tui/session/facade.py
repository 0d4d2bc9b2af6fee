"""``Session``: the tuning loop as the console drives it, a facade over small services.

A mode (``tui/modes``) builds the services from the adapters it chose and hands them here:
the run book (runs, labels, store writes), the server slot (the one server watched now),
the telemetry hub (pollers and peaks), pre-flight and the load service. The session only
sequences them (a restart: cancel the load, stop, wait for the GPU, estimate, store the
run, launch) and routes the server's events into the run book and the hub.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence

from tui.domain.errors import VtcError
from tui.domain.events import Launched, ServerEvent, ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.flags.vllm_cli import VllmCli
from tui.domain.history import TelemetryHistory
from tui.domain.record import LoadRecorded, RunEnded
from tui.domain.results import BenchResult, RunRecord, RunStatus, SweepTag
from tui.domain.server_config import ServerConfig
from tui.domain.telemetry import ServerMetrics
from tui.domain.workload import LoadSpec
from tui.server.backend import Takeover
from tui.session.bus import EventBus
from tui.session.busy import Busy
from tui.session.hub import TelemetryHub
from tui.session.loads import LoadService
from tui.session.port import SessionEvent, SessionInfo, TwinControl
from tui.session.preflight import Preflight
from tui.session.relaunch import Relaunch, ReleaseWaiter
from tui.session.repro import ReproRecorder
from tui.session.runbook import RunBook
from tui.session.slot import LeftRunning, ServerSlot
from tui.session.tools import RunFiles, RunTools

Slos = Mapping[str, float]
"""Goodput SLOs in ms, bench serve's ``--goodput`` (they travel with each load)."""
UNWATCHED_WHY = "left running; the console that watched it closed"


Keep = Callable[[LoadRecorded], Awaitable[object]]


async def _keep(
    twin: TwinControl | None,
    record: RunRecord,
    spec: LoadSpec,
    record_load: Callable[[int, LoadRecorded], Awaitable[object]],
) -> Keep:
    """How a load on ``record``'s server is kept: by the run book, with the twin's
    prediction of it (made now, before the load runs) when there is a twin."""
    assert record.id is not None
    keep: Keep = functools.partial(record_load, record.id)
    if twin is None:
        return keep
    try:
        prediction = await twin.predict(record.flags, spec)
    except Exception:  # a twin that cannot predict never stops a load
        return keep
    if prediction is None:
        return keep

    async def with_prediction(event: LoadRecorded) -> object:
        return await keep(dataclasses.replace(event, prediction=prediction))

    return with_prediction


class Session:
    """One operator's tuning loop: a server at a time, a board of runs, live telemetry."""

    def __init__(
        self,
        info: SessionInfo,
        *,
        bus: EventBus,
        book: RunBook,
        slot: ServerSlot,
        hub: TelemetryHub,
        preflight: Preflight,
        loads: LoadService,
        release: ReleaseWaiter | None = None,
        repro: ReproRecorder | None = None,
        files: RunFiles | None = None,
    ) -> None:
        self.info, self._bus, self._book, self._slot, self._repro = info, bus, book, slot, repro
        self._hub, self._preflight, self._loads, self._release = hub, preflight, loads, release
        self._closed = self.detached = False
        self.left_running: LeftRunning | None = None  # what a detach left running (pid, URL)
        self._restarting = Busy("a restart is already under way", "wait for it, or s stops it")
        self._relaunch = Relaunch(
            info, book, slot, preflight, release, stop=self.stop_server, emit=bus.emit
        )
        slot.listen(self._on_server_event)
        self.tools = RunTools(self, files)  # the board's repeat, export, presets, log tails

    # -- what the console reads --------------------------------------------------------------
    @property
    def runs(self) -> list[RunRecord]:
        """Every run on the board, oldest first."""
        return self._book.runs

    @property
    def current(self) -> RunRecord | None:
        """The run whose server is watched now."""
        return self._book.current

    @property
    def can_restart(self) -> bool:
        """Whether this session launches servers (not when attached to a URL)."""
        return self._slot.can_launch

    @property
    def state(self) -> ServerState:
        """The current server's lifecycle state."""
        return self._slot.state

    @property
    def log_lines(self) -> Sequence[str]:
        """The current server's log tail."""
        return self._slot.log_lines

    @property
    def base_url(self) -> str | None:
        """Where the current server answers."""
        return self._slot.base_url

    @property
    def pid(self) -> int | None:
        """The current server's root pid, when local."""
        return self._slot.pid

    @property
    def server_config(self) -> ServerConfig | None:
        """The attached server's configuration as read from it (``None``: not attached)."""
        return self._slot.server_config

    @property
    def vllm_cli(self) -> VllmCli | None:
        """The installed vLLM's flags, once loaded in the background."""
        return self._preflight.vllm_cli

    @property
    def vllm_cli_error(self) -> str | None:
        """Why the flag list is not available, if it is not."""
        return self._preflight.vllm_cli_error

    @property
    def history(self) -> TelemetryHistory:
        """The panels' numbers over the last minutes."""
        return self._hub.history

    def subscribe(self, callback: Callable[[SessionEvent], None]) -> None:
        """Deliver every session event to ``callback`` (on the session's event loop)."""
        self._bus.subscribe(callback)

    async def preflight(self, flags: ServeFlags) -> list[str]:
        """Warnings about ``flags`` before launch (computed off the event loop)."""
        return await self._preflight.check(flags)

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Telemetry, the flag list, the server found running (or the first launch)."""
        self._hub.start()
        self._preflight.load_cli()
        takeover = await self._slot.take_over()
        kept = {takeover.run_id} if takeover is not None and takeover.run_id is not None else set()
        # orphans settled; other processes' runs followed from now on
        self._book.begin(set(self.info.protected_runs) | kept)
        if takeover is not None:
            await _resume(self._book, self._slot, takeover)
        elif self.info.autostart and self.can_restart:
            await self.restart(self.info.initial_flags)

    async def restart(
        self,
        flags: ServeFlags,
        sweep: SweepTag | None = None,
        *,
        proceed: Callable[[], bool] | None = None,
    ) -> RunRecord:
        """Stop what runs (load first), launch ``flags`` as a new run (``sweep``: a trial's
        tag; ``proceed``: asked once the old server is gone, else :class:`LaunchWithdrawn`)."""
        if not self._slot.can_launch:
            raise VtcError("attached to a server this console did not start: restart disabled")
        with self._restarting.hold():  # one at a time: a second is refused (the console says so)
            record = await self._relaunch(flags, sweep, proceed, closing=lambda: self._closed)
            return self._book.current or record

    async def stop_server(self) -> None:
        """Stop the current server (cancelling the load first) and its telemetry."""
        await self._loads.cancel()
        await self._hub.unwatch_server()
        await self._slot.stop()

    async def close(self) -> None:
        """Stop the load, the server this session may stop, every poller; close the store."""
        if self._closed:
            return
        self._closed = True
        await self._preflight.aclose()
        await self.stop_server()
        await self._shutdown()

    async def detach(self) -> bool:
        """Leave the server running for the next ``vtc`` (a hang-up); False: stopped instead."""
        if self._closed:
            return self.detached
        self._closed = True
        await self._preflight.aclose()
        await self._loads.cancel()
        await self._hub.unwatch_server()
        self.detached = await self._slot.detach_or_stop()
        self.left_running = self._slot.left_running
        await self._shutdown()
        return self.detached

    def abandon(self, why: str = "") -> None:
        """Last resort once the event loop is gone (a crash): kill the server, record why."""
        if self.detached or self._slot.state not in (ServerState.STARTING, ServerState.READY):
            return
        self._slot.abandon()
        self._book.end_now(RunEnded(RunStatus.STOPPED, why or "the console ended abruptly"))

    # -- load --------------------------------------------------------------------------------
    async def run_load(
        self, spec: LoadSpec, model: str | None = None, goodput: Slos | None = None
    ) -> BenchResult | None:
        """Run ``spec`` (``model``: a LoRA adapter; ``goodput``: its SLOs in ms) on the ready
        server; the result is kept as a load of the current run's server (its own run)."""
        record, url = self._book.current, self._slot.base_url
        if self.state is not ServerState.READY or record is None or record.id is None or not url:
            raise VtcError(f"the server is {self.state.value}, not ready", hint="start it with r")
        model = model or record.flags.served_model_name or record.flags.model
        keep = await _keep(self.info.twin, record, spec, self._book.record_load)
        return await self._loads.run_kept(spec, url, model, goodput, watch=self._hub, keep=keep)

    async def fresh_metrics(self) -> ServerMetrics | None:
        """The hub's next reading of the server's /metrics (``None``: none): no second scrape."""
        return await self._hub.next_metrics()

    @property
    def load_running(self) -> bool:
        """Whether a load runs now (``run_load`` refuses a second one)."""
        return self._loads.running

    async def cancel_load(self) -> None:
        """Cancel every in-flight stream of the running load, keeping partial results."""
        await self._loads.cancel()

    # -- internals ---------------------------------------------------------------------------
    def _on_server_event(self, event: ServerEvent) -> None:
        self._book.apply(event)
        self._hub.follow(event, self._book.current, url=self._slot.base_url, pid=self._slot.pid)
        if isinstance(event, Launched) and self._repro is not None:
            self._repro.launched(event)
        self._bus.emit(event)

    async def _shutdown(self) -> None:
        if self._repro is not None:
            await self._repro.aclose()
        if not self.detached:  # still live (an attached server): nobody will watch it now
            self._book.apply(RunEnded(RunStatus.LOST, UNWATCHED_WHY))
        await self._hub.aclose()
        await self._slot.aclose()
        await self._book.close()


async def _resume(book: RunBook, slot: ServerSlot, takeover: Takeover) -> None:
    """Watch the server found running, on its run (resumed, or a new card for it)."""
    status = RunStatus.READY if slot.state is ServerState.READY else RunStatus.STARTING
    card = RunRecord(flags=takeover.flags, label=takeover.label, status=status)
    record = await book.resume_or_open(takeover.run_id, card, executable=slot.base_url)
    slot.watch(record.id)
