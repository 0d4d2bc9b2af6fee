"""The load service: one load run at a time against the current server, cancellable."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from tui.domain.errors import VtcError, one_line
from tui.domain.results import BenchResult
from tui.domain.workload import LoadProgress, LoadSpec


class LoadRunnerLike(Protocol):
    """What the service needs of ``tui.load.runner.LoadRunner``."""

    async def run(
        self,
        spec: LoadSpec,
        *,
        base_url: str,
        model: str,
        on_progress: Callable[[LoadProgress], None] | None = None,
    ) -> BenchResult: ...

    async def cancel(self) -> object: ...


class LoadBusy(VtcError):
    """A load is already running."""


class LoadFailedError(VtcError):
    """The load generator raised: the message is its one line."""


class LoadService:
    """Runs a :class:`LoadSpec` with the runner it was given; reports progress."""

    def __init__(self, runner: LoadRunnerLike, on_progress: Callable[[LoadProgress], None]):
        self._runner = runner
        self._on_progress = on_progress
        self._running = False

    @property
    def running(self) -> bool:
        """Whether a load run is in progress."""
        return self._running

    async def run(self, spec: LoadSpec, *, base_url: str, model: str) -> BenchResult:
        """Run ``spec``; raises :class:`LoadFailedError` (one line) if the runner raised."""
        if self._running:
            raise LoadBusy("a load run is already in progress", hint="c cancels it")
        self._running = True
        try:
            return await self._runner.run(
                spec, base_url=base_url, model=model, on_progress=self._on_progress
            )
        except VtcError:
            raise
        except Exception as exc:  # the load generator reports, the console keeps going
            raise LoadFailedError(one_line(exc)) from exc
        finally:
            self._running = False

    async def cancel(self) -> None:
        """Cancel every in-flight stream of the running load, keeping partial results."""
        if self._running:
            await self._runner.cancel()
