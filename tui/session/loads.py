"""The load service: one load run at a time against the current server, cancellable.

The console's runner is :class:`tui.load.process.ProcessLoadRunner`: each load in its own
process, so the UI's loop never delays its clock (issue 23). A load's goodput SLOs travel
with it (``goodput``), never as state on the runner.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from tui.domain.errors import VtcError, one_line
from tui.domain.record import LoadRecorded
from tui.domain.results import BenchResult, TelemetryPeaks
from tui.domain.workload import LoadProgress, LoadSpec
from tui.session.port import LoadFinished, SessionEvent


class LoadRunnerLike(Protocol):
    """What the service needs of ``tui.load.runner.LoadRunner``."""

    async def run(
        self,
        spec: LoadSpec,
        *,
        base_url: str,
        model: str,
        on_progress: Callable[[LoadProgress], None] | None = None,
        goodput: Mapping[str, float] | None = None,
    ) -> BenchResult: ...

    async def cancel(self) -> object: ...


class LoadWatch(Protocol):
    """What watches a load beside it: ``tui.session.hub.TelemetryHub`` (peaks, latency)."""

    def begin_load(self) -> None: ...
    def end_load(self, result: BenchResult | None) -> TelemetryPeaks: ...


class LoadBusy(VtcError):
    """A load is already running."""


class LoadFailedError(VtcError):
    """The load generator raised: the message is its one line."""


class LoadService:
    """Runs a :class:`LoadSpec` with the runner it was given; reports progress."""

    def __init__(self, runner: LoadRunnerLike, emit: Callable[[SessionEvent], None]):
        self._runner = runner
        self._emit = emit
        self._running = False

    @property
    def running(self) -> bool:
        """Whether a load run is in progress."""
        return self._running

    async def run(
        self,
        spec: LoadSpec,
        *,
        base_url: str,
        model: str,
        goodput: Mapping[str, float] | None = None,
    ) -> BenchResult:
        """Run ``spec`` (``goodput``: its SLOs in ms, bench serve's ``--goodput``); raises
        :class:`LoadFailedError` (one line) if the runner raised."""
        if self._running:
            raise LoadBusy("a load run is already in progress", hint="c cancels it")
        self._running = True
        try:
            return await self._runner.run(
                spec,
                base_url=base_url,
                model=model,
                on_progress=self._emit,
                goodput=dict(goodput) if goodput else None,
            )
        except VtcError:
            raise
        except Exception as exc:  # the load generator reports, the console keeps going
            raise LoadFailedError(one_line(exc)) from exc
        finally:
            self._running = False

    async def run_kept(
        self,
        spec: LoadSpec,
        base_url: str,
        model: str,
        goodput: Mapping[str, float] | None,
        *,
        watch: LoadWatch,
        keep: Callable[[LoadRecorded], Awaitable[object]],
    ) -> BenchResult | None:
        """:meth:`run` watched by ``watch``; the result and its peaks go to ``keep`` (the run
        book's ``record_load``), then :class:`LoadFinished` is emitted. A failure is said
        in :class:`LoadFinished` (one line) and returns ``None``."""
        watch.begin_load()
        try:
            result = await self.run(spec, base_url=base_url, model=model, goodput=goodput)
        except VtcError as exc:
            partial = getattr(exc, "partial", None)  # a killed worker: what it measured
            if isinstance(partial, BenchResult):
                await keep(LoadRecorded(partial, spec, watch.end_load(partial)))
            else:
                watch.end_load(None)
            self._emit(LoadFinished(partial, error=exc.one_line()))
            return None
        await keep(LoadRecorded(result, spec, watch.end_load(result)))
        self._emit(LoadFinished(result))
        return result

    async def cancel(self) -> None:
        """Cancel every in-flight stream of the running load, keeping partial results."""
        if self._running:
            await self._runner.cancel()
