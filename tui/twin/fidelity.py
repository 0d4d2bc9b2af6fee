"""How close a twin is to its real server, on configurations it was not fitted on.

A held-out case is a command line (flag overrides on the calibrated server's) and a load.
Each runs on the real server (launched per distinct command line, warmed, the prefix cache
reset before every load, ``repeats`` times so the real server's own repeat-to-repeat
spread is measured in the same run) and on the twin (:func:`tui.twin.predict.predict`, before
the real run: a prediction, not a replay). ``benchmarks/sim_fidelity.py`` and the
``realvllm`` regression test print and bound :func:`summarize`'s figures.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from tui.domain.flags.serve import ServeFlags
from tui.domain.prediction import Prediction, TwinMetric
from tui.domain.profile import Profile, abs_pct_error
from tui.domain.results import BenchResult
from tui.domain.workload import LoadSpec
from tui.load.runner import LoadRunner
from tui.twin.calibrate import reset_prefix_cache
from tui.twin.predict import predict

#: The metrics compared (a :class:`Prediction` and a bench result have each).
METRICS = (
    TwinMetric.OUTPUT_THROUGHPUT,
    TwinMetric.MEAN_TTFT,
    TwinMetric.P99_TTFT,
    TwinMetric.MEAN_TPOT,
    TwinMetric.MEAN_ITL,
    TwinMetric.P99_ITL,
    TwinMetric.MEAN_E2EL,
    TwinMetric.P99_E2EL,
)
PERCENTILES = (50.0, 90.0, 99.0)


@dataclass(frozen=True)
class HeldOut:
    """One held-out configuration: flag overrides and a load."""

    name: str
    overrides: tuple[tuple[str, Any], ...]
    load: LoadSpec

    def flags(self, base: ServeFlags) -> ServeFlags:
        """``base`` with this case's overrides."""
        return base.model_copy(update=dict(self.overrides))


def _load(inp: int, out: int, n: int, conc: int | None, **kw: Any) -> LoadSpec:
    return LoadSpec(
        input_len=inp,
        output_len=out,
        num_prompts=n,
        max_concurrency=conc,
        seed=101,
        ignore_eos=True,
        **kw,
    )


def held_out(quick: bool = False) -> list[HeldOut]:
    """The held-out set: every flag vtc tunes moved off the calibration's, new loads.

    ``quick``: the cases on the calibrated command line plus three restarts (Poisson
    arrivals, high concurrency and long prompts through a small chunk budget among them).
    """
    cases = [
        HeldOut("base-c12-200/100", (), _load(200, 100, 36, 12)),
        HeldOut("base-rate15-poisson", (), _load(128, 64, 45, None, request_rate=15.0)),
        HeldOut("base-c96-high", (), _load(48, 48, 96, 96)),
        HeldOut("mbt256-long", (("max_num_batched_tokens", 256),), _load(1024, 32, 16, 4)),
        HeldOut("seqs4-c16", (("max_num_seqs", 4),), _load(64, 96, 24, 16)),
        HeldOut(
            "kv-pressure-mml1024",
            (("max_model_len", 1024), ("kv_cache_memory_bytes", 4 * 2**20)),
            _load(256, 128, 48, 32),
        ),
    ]
    if quick:
        return cases
    return [
        *cases,
        HeldOut("base-rate6-poisson-long", (), _load(512, 48, 30, None, request_rate=6.0)),
        HeldOut(
            "no-prefix-cache-shared",
            (("enable_prefix_caching", False),),
            _load(64, 32, 32, 8, prefix_len=512),
        ),
        HeldOut("prefix-cache-shared", (), _load(64, 32, 32, 8, prefix_len=512)),
        HeldOut(
            "no-chunked-prefill",
            (("enable_chunked_prefill", False), ("max_num_batched_tokens", 4096)),
            _load(512, 64, 24, 8),
        ),
    ]


@dataclass
class CaseResult:
    """A held-out case on both sides."""

    case: HeldOut
    real: list[BenchResult] = field(default_factory=list)
    twin: Prediction | None = None
    twin_failure: str | None = None
    real_failure: str | None = None

    def real_value(self, key: str) -> float | None:
        """The mean of the real repeats for ``key``."""
        values = [v for r in self.real if (v := r.metric(key)) is not None and math.isfinite(v)]
        return statistics.fmean(values) if values else None

    def error(self, key: str) -> float | None:
        """Absolute % error of the twin's prediction of ``key``."""
        real = self.real_value(key)
        if real is None or self.twin is None:
            return None
        return abs_pct_error(self.twin.metric(key), real)

    def spread(self, key: str) -> float | None:
        """The real repeats' spread for ``key``: ``100 * (max - min) / mean``."""
        values = [v for r in self.real if (v := r.metric(key)) is not None and math.isfinite(v)]
        if len(values) < 2 or not statistics.fmean(values):
            return None
        return 100.0 * (max(values) - min(values)) / statistics.fmean(values)


@dataclass(frozen=True)
class Summary:
    """Per metric: median and worst absolute % error; the real servers' median spread;
    the share of held-out errors inside the profile's stated interval (``nan``: none)."""

    median: dict[str, float]
    worst: dict[str, float]
    spread: float
    coverage: float = math.nan

    def last_line(self) -> str:
        """The benchmark's closing line (issue 20's wording)."""

        def pair(key: str) -> str:
            median, worst = self.median.get(key, math.inf), self.worst.get(key, math.inf)
            return f"{median:.1f}% (worst {worst:.1f}%)"

        return (
            f"twin error: throughput {pair('output_throughput')}, e2el {pair('mean_e2el_ms')}, "
            f"ttft {pair('mean_ttft_ms')}; real repeat spread {self.spread:.1f}%; "
            f"inside the stated interval {100 * self.coverage:.0f}%"
        )


def summarize(results: Sequence[CaseResult], profile: Profile | None = None) -> Summary:
    """The figures of :class:`Summary` over ``results`` (``profile``: whose stated interval,
    per metric, the coverage counts against)."""
    median: dict[str, float] = {}
    worst: dict[str, float] = {}
    for key in METRICS:
        errs = [e for r in results if (e := r.error(key)) is not None and math.isfinite(e)]
        if errs:
            median[key] = statistics.median(errs)
            worst[key] = max(errs)
    spreads = [s for r in results for k in METRICS if (s := r.spread(k)) is not None]
    spread = statistics.median(spreads) if spreads else math.nan
    return Summary(median, worst, spread, coverage(results, profile) if profile else math.nan)


def coverage(results: Sequence[CaseResult], profile: Profile) -> float:
    """The share of held-out (case, metric) errors within the profile's stated interval
    for that metric (the metrics a fit compares; ``nan``: none to count)."""
    stated = profile.stated
    inside = [
        e <= m.interval_pct
        for r in results
        for m in stated.metrics
        if (e := r.error(m.metric)) is not None and math.isfinite(e)
    ]
    return sum(inside) / len(inside) if inside else math.nan


def twin_side(profile: Profile, base: ServeFlags, case: HeldOut, result: CaseResult) -> None:
    """The twin's prediction of ``case`` into ``result``."""
    pred = predict(profile, case.flags(base), case.load)
    result.twin = pred if pred.starts else None
    result.twin_failure = pred.failure


async def real_side(
    base_url: str,
    model: str,
    case: HeldOut,
    result: CaseResult,
    client: Callable[[], httpx.AsyncClient],
    repeats: int = 2,
) -> None:
    """``case``'s load ``repeats`` times on the real server, each from a cold prefix cache."""
    load = case.load.model_copy(update={"num_warmups": 1})  # left out of the numbers
    for _ in range(repeats):
        await reset_prefix_cache(base_url, client)
        runner = LoadRunner(client="vtc-bench", percentiles=PERCENTILES)
        result.real.append(await runner.run(load, base_url=base_url, model=model))
