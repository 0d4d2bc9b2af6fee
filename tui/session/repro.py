"""Recording what it takes to reproduce each run, as it launches (off the event loop)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from tui.domain.events import Launched
from tui.domain.record import Reproduced
from tui.domain.results import Reproduction
from tui.domain.telemetry import GpuSample
from tui.session.hub import TelemetryHub
from tui.session.runbook import RunBook


class Reproducer(Protocol):
    """The machine's facts for a launch (``tui.server.repro``): may block, run in a thread."""

    def capture(self, argv: Sequence[str], gpu: GpuSample | None) -> Reproduction: ...


class ReproRecorder:
    """On each launch, captures the reproduction facts and folds them into that run."""

    def __init__(self, reproducer: Reproducer | None, book: RunBook, hub: TelemetryHub) -> None:
        self._reproducer = reproducer
        self._book = book
        self._hub = hub
        self._pending: set[asyncio.Task[None]] = set()

    def launched(self, event: Launched) -> None:
        """The current run's server started as ``event.argv``: record the facts (a task)."""
        run = self._book.current
        if self._reproducer is None or run is None or run.id is None:
            return
        task = asyncio.ensure_future(self._capture(self._reproducer, event.argv, run.id))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def aclose(self) -> None:
        """Wait for the captures under way (each is quick: a few reads of the machine)."""
        await asyncio.gather(*self._pending, return_exceptions=True)

    async def _capture(self, reproducer: Reproducer, argv: Sequence[str], run_id: int) -> None:
        facts = await asyncio.to_thread(reproducer.capture, argv, self._hub.latest_gpu)
        self._book.apply(Reproduced(facts), run_id)
