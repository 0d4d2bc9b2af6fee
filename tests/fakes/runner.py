"""A load runner double with the surface the session's load service uses."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from tui.domain.results import BenchResult
from tui.domain.workload import LoadProgress, LoadSpec


class FakeRunner:
    """Runs until released (or cancelled); then returns ``result`` or raises ``error``."""

    def __init__(self, result: BenchResult | None = None, error: Exception | None = None):
        self.result = result or BenchResult(completed=4, output_throughput=100.0)
        self.error = error
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = False
        self.calls: list[tuple[LoadSpec, str, str]] = []
        self.goodputs: list[dict[str, float]] = []  # each run's SLOs, as they came with it

    async def run(
        self,
        spec: LoadSpec,
        *,
        base_url: str,
        model: str,
        on_progress: Callable[[LoadProgress], None] | None = None,
        goodput: Mapping[str, float] | None = None,
    ) -> BenchResult:
        """Report one progress tick, wait to be released or cancelled."""
        self.calls.append((spec, base_url, model))
        self.goodputs.append(dict(goodput or {}))
        if on_progress is not None:
            on_progress(LoadProgress(0.1, 0, 0, 1, spec.num_prompts, 0.0))
        self.started.set()
        await self.release.wait()
        if self.error is not None:
            raise self.error
        if self.cancelled:
            return self.result.model_copy(update={"cancelled": True, "completed": 1})
        return self.result

    async def cancel(self) -> None:
        """Cancel: the run returns its partial result."""
        self.cancelled = True
        self.release.set()
