"""The twin a twin-first sweep ranks on: a what-if lane, refitted with every real trial.

A :class:`Twin` gives a lane on the simulator's virtual clock (``tui.tune.whatif_lane``:
the scheduler, KV blocks, chunked prefill and prefix caching of ``vtc-sim serve``) and
learns from the real trials measured so far (:meth:`Twin.refit`).

:class:`WhatIfTwin` runs the what-if lane on given ``--sim-*`` arguments (a catalogue GPU,
hand-made, or a calibrated profile), and its refit is injected: a callable from the real
observations to a :class:`TwinFit` (new simulator arguments, a correction, an error). The
default, :func:`scale_refit`, corrects the twin's numbers metric by metric: each metric of
bench serve is multiplied by the geometric mean of real over twin on the trials measured
(the twin re-run, uncorrected, on each trial's flags and load), and states the error of
that correction on trials it left out (each predicted by the others' factors), or that it
is not validated. It keeps the twin's shape
(which configuration wins where the scheduler and memory decide) and takes the machine's
scale from the real server; a fitted step-time profile (issue 20's ``vtc calibrate``)
corrects the shape too.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tui.domain.flags.serve import ServeFlags
from tui.domain.prediction import covering
from tui.domain.results import BenchResult, SweepTag
from tui.domain.sweep.outcome import KEPT_METRICS
from tui.domain.workload import LoadSpec
from tui.tune.lanes import BenchRun, Lane, LaneError, StartResult
from tui.tune.whatif_lane import Cache, WhatIfLane

DEFAULT_TWIN_GPU = "l4-24gb"
"""The catalogue GPU a twin runs when neither a profile nor the spec's ``sim_gpu`` names one."""

TOP_LEVEL = (
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "request_goodput",
    "duration",
)
"""The metrics bench serve keeps outside ``stats`` that a correction scales."""
COUNTS = frozenset({"completed", "failed"})  # counted, not timed: never scaled


@dataclass(frozen=True)
class TwinObservation:
    """One real measurement the twin learns from: the server's flags, the load, the numbers."""

    flags: ServeFlags
    load: LoadSpec
    metrics: Mapping[str, float]
    model: str | None = None  # the adapter the requests addressed (``None``: the base)


@dataclass(frozen=True)
class Scales:
    """A factor per bench serve key (a statistic without its own takes its family's mean)."""

    factors: Mapping[str, float] = field(default_factory=dict)

    def factor(self, key: str) -> float:
        """The factor for ``key`` (``p99_itl_ms`` falls back to ``mean_itl_ms``'s; else 1)."""
        if key in self.factors:
            return self.factors[key]
        for family in ("ttft", "tpot", "itl", "e2el"):
            if f"_{family}_" in key:
                return self.factors.get(f"mean_{family}_ms", 1.0)
        return 1.0

    def apply(self, result: BenchResult) -> BenchResult:
        """``result`` with every timed number scaled (counts and settings untouched)."""
        if not self.factors:
            return result
        update: dict[str, object] = {}
        for key in TOP_LEVEL:
            value = getattr(result, key)
            if isinstance(value, int | float):
                update[key] = value * self.factor(key)
        update["stats"] = {k: v * self.factor(k) for k, v in result.stats.items()}
        return result.model_copy(update=update)


@dataclass(frozen=True)
class TwinFit:
    """What a refit gives: the simulator's arguments, a correction, a label, an error."""

    sim_args: tuple[str, ...]
    scales: Scales = field(default_factory=Scales)
    label: str = ""
    error: float | None = None  # the fit's own relative error of the objective, if it has one


Refit = Callable[["WhatIfTwin", Sequence[TwinObservation]], Awaitable[TwinFit]]


class Twin(Protocol):
    """The model a twin-first sweep ranks on."""

    @property
    def label(self) -> str:
        """What every predicted number carries: the twin and how it was fitted."""
        ...

    @property
    def stated_error(self) -> float | None:
        """The twin's own relative error (a profile's measured error; ``None``: unknown)."""
        ...

    @property
    def fitted(self) -> bool:
        """Whether it was fitted to the real server (a cold twin's errors say nothing of a
        fitted one's)."""
        ...

    def lane(self) -> Lane:
        """A lane on the twin as it stands (its virtual clock: seconds per ranking)."""
        ...

    async def refit(self, observations: Sequence[TwinObservation]) -> None:
        """Fit again with every real observation so far."""
        ...

    def calibration_loads(self, load: LoadSpec) -> list[LoadSpec]:
        """Loads to measure on the first real start before its trial (none: fitted)."""
        ...


class CorrectedLane:
    """A what-if lane whose numbers go through a :class:`Scales` correction."""

    def __init__(self, inner: WhatIfLane, scales: Scales) -> None:
        self._inner, self._scales = inner, scales

    @property
    def name(self) -> str:
        """The twin lane's name."""
        return self._inner.name

    async def start(self, flags: ServeFlags, tag: SweepTag) -> StartResult:
        """The simulator's configuration checks and memory plan."""
        return await self._inner.start(flags, tag)

    async def bench(
        self, load: LoadSpec, *, model: str | None, goodput: Mapping[str, float]
    ) -> BenchRun:
        """The load on the virtual clock, corrected."""
        run = await self._inner.bench(load, model=model, goodput=goodput)
        return BenchRun(self._scales.apply(run.result), run.prefix_hit_pct)

    async def reset_prefix_cache(self) -> bool:
        """Every what-if benchmark starts with an empty cache."""
        return await self._inner.reset_prefix_cache()

    async def abort(self) -> None:
        """Nothing to cut short."""

    async def release(self) -> None:
        """The trial is over: the what-if lane's own release."""
        await self._inner.release()


class WhatIfTwin:
    """The what-if lane on ``sim_args``, refitted by ``refit`` (default :func:`scale_refit`)."""

    def __init__(
        self,
        sim_args: Sequence[str],
        *,
        label: str,
        goodput: Mapping[str, float] | None = None,
        refit: Refit | None = None,
        stated_error: float | None = None,
    ) -> None:
        self.base_args = tuple(sim_args)
        self.base_label = label
        self.goodput = dict(goodput or {})
        self.cache: Cache = {}
        self._refit = refit or scale_refit
        self._fit = TwinFit(self.base_args, label=label, error=stated_error)
        self.refits = 0

    @property
    def label(self) -> str:
        """The twin and its fit."""
        return self._fit.label or self.base_label

    @property
    def stated_error(self) -> float | None:
        """The fit's own error (``None`` for a hand-made catalogue GPU)."""
        return self._fit.error

    @property
    def fitted(self) -> bool:
        """Whether the real trials scaled it yet."""
        return self.refits > 0

    @property
    def fit(self) -> TwinFit:
        """The fit the lane runs."""
        return self._fit

    def lane(self) -> Lane:
        """A what-if lane on the current fit."""
        return CorrectedLane(self.raw_lane(self._fit.sim_args), self._fit.scales)

    def raw_lane(self, sim_args: Sequence[str]) -> WhatIfLane:
        """An uncorrected what-if lane on ``sim_args`` (sharing this twin's cache)."""
        return WhatIfLane(sim_args, name="twin", cache=self.cache)

    async def refit(self, observations: Sequence[TwinObservation]) -> None:
        """Fit again (the injected refit) with every real observation so far."""
        if observations:
            self._fit = await self._refit(self, observations)
            self.refits += 1

    def calibration_loads(self, load: LoadSpec) -> list[LoadSpec]:
        """None: a catalogue GPU is corrected by the trials' own numbers."""
        return []

    async def raw_metrics(
        self, sim_args: Sequence[str], observation: TwinObservation
    ) -> dict[str, float] | None:
        """What the uncorrected twin on ``sim_args`` gives for an observation's flags and load
        (``None``: it would not start it, or could not run the load)."""
        lane = self.raw_lane(sim_args)
        start = await lane.start(observation.flags, SweepTag(sweep_id="refit", trial=0))
        if not start.ok:
            return None
        try:
            run = await lane.bench(observation.load, model=observation.model, goodput=self.goodput)
        except LaneError:
            return None
        return {k: float(v) for k in KEPT_METRICS if (v := run.result.metric(k)) is not None}


async def scale_refit(twin: WhatIfTwin, observations: Sequence[TwinObservation]) -> TwinFit:
    """Per metric, the geometric mean of real over the uncorrected twin (see the module),
    scored by itself: each trial predicted by the factors of the others (``error``: the
    interval :func:`~tui.domain.prediction.covering` states of those misses, a fraction;
    ``None`` with fewer than two trials, and the label says it is not validated)."""
    logs: dict[str, list[float]] = {}
    for obs in observations:
        raw = await twin.raw_metrics(twin.base_args, obs)
        if raw is None:
            continue
        for key, real in obs.metrics.items():
            mine = raw.get(key)
            if key in COUNTS or mine is None or not _positive(real) or not _positive(mine):
                continue
            logs.setdefault(key, []).append(math.log(real / mine))
    factors = {k: math.exp(sum(v) / len(v)) for k, v in logs.items() if v}
    n = len(observations)
    error = held_out_error(logs)
    said = f"±{100 * error:.0f}% held out" if error is not None else "not validated"
    label = f"{twin.base_label}, scaled to {n} real trial{'s' if n != 1 else ''}, {said}"
    return TwinFit(twin.base_args, Scales(factors), label, error)


def held_out_error(logs: Mapping[str, Sequence[float]]) -> float | None:
    """Each trial's miss (every metric) when its factor is the others' geometric mean: the
    interval :func:`~tui.domain.prediction.covering` states of them, a fraction."""
    misses = []
    for values in logs.values():
        if len(values) < 2:
            continue
        total = sum(values)
        for v in values:
            others = (total - v) / (len(values) - 1)
            misses.append(abs(math.expm1(v - others)))
    if not misses:
        return None
    return covering(misses)


def _positive(x: float) -> bool:
    return math.isfinite(x) and x > 0


def catalogue_twin(gpu: str | None, goodput: Mapping[str, float] | None = None) -> WhatIfTwin:
    """The twin on a catalogue GPU (hand-made: marked so), corrected by the real trials."""
    name = gpu or DEFAULT_TWIN_GPU
    return WhatIfTwin(
        ["--sim-gpu", name], label=f"twin {name} (hand-made catalogue GPU)", goodput=goodput
    )
