"""Goodput for a sweep's loads on a runner that was built without SLOs (the console's).

bench serve's ``request_goodput`` counts the requests that met every ``--goodput``
threshold (``serve.py:1473-1508``); ``tui.load`` computes it from the per-request records
when the runner was given the thresholds. The console's runner is built once, before any
sweep names its SLOs, so this adapter recomputes the figure from the runner's own
``last_records`` with the same function (``tui.load.stats.calculate_metrics``) while a
sweep sets ``slos``. Without SLOs it passes results through untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from tui.domain.results import BenchResult
from tui.domain.workload import LoadProgress, LoadSpec
from tui.load.stats import RequestRecord, calculate_metrics
from tui.session.loads import LoadRunnerLike


class RecordingRunner(LoadRunnerLike, Protocol):
    """``tui.load.runner.LoadRunner`` as this adapter uses it: a runner that keeps its records."""

    last_records: list[RequestRecord]


class GoodputRunner:
    """A load runner whose results carry ``request_goodput`` for the sweep's thresholds."""

    def __init__(self, inner: RecordingRunner) -> None:
        self._inner = inner
        self.slos: dict[str, float] = {}
        """bench serve's ``--goodput`` thresholds in ms (set by the sweep that runs)."""

    async def run(
        self,
        spec: LoadSpec,
        *,
        base_url: str,
        model: str,
        on_progress: Callable[[LoadProgress], None] | None = None,
    ) -> BenchResult:
        """The inner run, with goodput added when SLOs are set."""
        result = await self._inner.run(
            spec, base_url=base_url, model=model, on_progress=on_progress
        )
        if not self.slos:
            return result
        good = goodput(self._inner.last_records, result.duration, self.slos)
        return result.model_copy(update={"request_goodput": good})

    async def cancel(self) -> object:
        """Cancel the inner run."""
        return await self._inner.cancel()


def goodput(records: Sequence[RequestRecord], duration: float, slos: dict[str, float]) -> float:
    """Requests per second that met every threshold (bench serve's ``request_goodput``)."""
    return calculate_metrics(records, duration, goodput=slos).request_goodput
