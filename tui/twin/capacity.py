"""Capacity on the twin: the latency-versus-rate curve, the highest rate that meets the SLOs.

:func:`search` asks a predictor (a load at a rate -> :class:`~tui.domain.prediction.Prediction`)
for as few rates as it can: the server's saturated throughput first (an unbounded rate: no
offered rate above what it serves can be held), a light rate (if that misses, no rate
holds), then the crossing of the SLOs by Brent's method (``scipy.optimize.brentq``) between
the highest rate seen to meet them and the lowest seen to miss, and the same for the two
interval edges (the SLO statistics ``1 ± e`` times the prediction, ``e`` from
:func:`stated_interval`); then a few rates where the curve has no point yet. Every
prediction is a point of the curve; none is made twice. With ``load_seconds`` each finite
rate's load is sized as the real loads that confirm it are
(:func:`tui.domain.capacity.sized_load`); the saturated run sends the whole workload.

:func:`twin_capacity` is that search on :func:`tui.twin.predict.predict` for a profile,
flags and workload: blocking (each prediction runs the load on the twin's virtual clock),
so the console runs it in a worker thread.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime

from tui.domain.capacity import CapacityAnswer, CurvePoint, Limit, replicas_for, sized_load
from tui.domain.errors import VtcError
from tui.domain.flags.serve import ServeFlags
from tui.domain.prediction import Prediction, TwinMetric
from tui.domain.profile import Profile
from tui.domain.results import RunRecord
from tui.domain.sweep.slo import SloLimits
from tui.domain.workload import LoadSpec
from tui.twin.predict import predict

Predictor = Callable[[LoadSpec], Prediction]
"""The twin's run of one load (the workload at one rate)."""

MOST_PREDICTIONS = 16
"""The most twin runs one answer makes (the twin's answer must come in seconds)."""
LIGHT_SHARE = 0.05
"""The light rate tried first, as a share of the saturated throughput."""
RATE_TOLERANCE = 0.01
"""The crossing is found to this share of the saturated throughput (brentq's xtol)."""
EDGE_TOLERANCE = 0.02
"""The interval edges, to this share (they carry the twin's error anyway)."""
CURVE_SHARES = (0.25, 0.5, 0.75, 0.9)
"""Where the curve gets a point if none is near (shares of the saturated throughput)."""
NEAR_SHARE = 0.08


class CapacityError(VtcError):
    """The capacity of these flags cannot be computed (the message says why)."""


def stated_interval(prediction: Prediction, metric: str) -> float | None:
    """The relative half-width, in percent, of the interval the twin states for
    ``metric`` in ``prediction`` (``None``: not validated, no interval).

    The one place capacity reads the twin's error: each SLO metric's own interval, as its
    held-out validation measured it (:meth:`Prediction.interval`); a metric the twin does
    not state an interval for, or a profile never validated, states none.
    """
    try:
        key = TwinMetric(metric)
    except ValueError:
        return None
    error = prediction.interval(key)
    return error if error is not None and math.isfinite(error) and error >= 0 else None


class _Curve:
    """The predictions made so far, by rate (none made twice), within the budget."""

    def __init__(
        self,
        predictor: Predictor,
        workload: LoadSpec,
        slos: SloLimits,
        load_seconds: float | None = None,
    ) -> None:
        self._predictor = predictor
        self._workload = workload
        self._slos = slos
        self._load_seconds = load_seconds
        self.points: dict[float, CurvePoint] = {}
        self.first: Prediction | None = None
        self.errors: dict[str, float | None] = {}
        self.served_error = 0.0  # the twin's throughput interval, a share (0: none stated)

    @property
    def spent(self) -> int:
        return len(self.points)

    def at(self, rate: float) -> CurvePoint:
        """The point at ``rate`` (predicted now unless it was already)."""
        rate = float(f"{rate:.4g}") if math.isfinite(rate) else rate
        found = self.points.get(rate)
        if found is not None:
            return found
        load = sized_load(self._workload, rate, self._load_seconds)
        prediction = self._predictor(load)
        if not prediction.starts:
            raise _NoStart(prediction)
        if self.first is None:
            self.first = prediction
            self.errors = {k: stated_interval(prediction, k) for k in self._slos.limits}
            served = stated_interval(prediction, TwinMetric.OUTPUT_THROUGHPUT)
            self.served_error = served / 100.0 if served is not None else 0.0
        stats = {k: _stat(prediction, k) for k in self._slos.limits}
        point = CurvePoint(rate=rate, stats=stats, served=prediction.metric("request_throughput"))
        self.points[rate] = point
        return point

    def ratio(self, rate: float, edge: float = 0.0) -> float:
        """The worst SLO statistic over its limit at ``rate``; ``edge`` -1 or +1: the
        interval's optimistic or pessimistic edge."""
        point = self.at(rate)
        worst = 0.0
        for key, limit in self._slos.limits.items():
            error = self.errors.get(key)
            scale = 1.0 + edge * (error / 100.0 if error is not None else 0.0)
            worst = max(worst, max(scale, 0.0) * point.stats[key] / limit)
        return worst

    def bracket(self, edge: float) -> tuple[float, float] | None:
        """The highest finite rate seen to meet (at ``edge``) below the lowest seen to miss."""
        rates = sorted(r for r in self.points if math.isfinite(r))
        met = [r for r in rates if self.ratio(r, edge) <= 1.0]
        if not met:
            return None
        lo = max(met)
        missed = [r for r in rates if r > lo and self.ratio(r, edge) > 1.0]
        return (lo, min(missed)) if missed else None


class _NoStart(Exception):
    def __init__(self, prediction: Prediction) -> None:
        super().__init__(prediction.failure or "")
        self.prediction = prediction


def _stat(prediction: Prediction, key: str) -> float:
    value = getattr(prediction, key, None)
    if value is None:
        raise CapacityError(
            f"the twin does not predict {key}",
            hint="use one of " + ", ".join(sorted(predicted_slo_keys())),
        )
    return float(value)


def predicted_slo_keys() -> set[str]:
    """The SLO keys (bench serve's ``<stat>_<metric>_ms``) the twin's predictions carry."""
    return {
        name
        for name in Prediction.model_fields
        if name.endswith("_ms") and name.split("_")[0] in ("mean", "median", "p50", "p90", "p99")
    }


def check_slos(slos: SloLimits) -> None:
    """Refuse SLOs the twin cannot answer (none, or a statistic it does not predict)."""
    if not slos.limits:
        raise CapacityError("capacity needs at least one SLO", hint="e.g. --slo p99_ttft_ms=500")
    unknown = sorted(set(slos.limits) - predicted_slo_keys())
    if unknown:
        raise CapacityError(
            f"the twin does not predict {', '.join(unknown)}",
            hint="use " + ", ".join(sorted(predicted_slo_keys())),
        )


def _crossing(curve: _Curve, edge: float, tolerance: float, budget: int) -> float | None:
    """The rate where the SLO ratio (at ``edge``) crosses 1, between the bracket seen so far
    (``None``: no bracket: met nowhere, or missed nowhere)."""
    from scipy import optimize  # imported when used: scipy.optimize costs ~0.4 s

    found = curve.bracket(edge)
    if found is None:
        return None
    lo, hi = found
    if hi - lo <= tolerance or curve.spent >= budget:
        return lo

    def excess(rate: float) -> float:
        if curve.spent >= budget and rate not in curve.points:
            raise _Spent
        # in logs: the ratio grows without bound toward saturation, its log far less
        return math.log(max(curve.ratio(rate, edge), 1e-9))

    # the budget ends the refinement: the bracket found so far stands
    with contextlib.suppress(_Spent, RuntimeError, ValueError):
        optimize.brentq(excess, lo, hi, xtol=tolerance, maxiter=12)
    final = curve.bracket(edge)
    return final[0] if final is not None else lo


class _Spent(Exception):
    """The prediction budget is spent."""


def search(
    predictor: Predictor,
    workload: LoadSpec,
    slos: SloLimits,
    *,
    label: str = "",
    target_rate: float | None = None,
    budget: int = MOST_PREDICTIONS,
    load_seconds: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> CapacityAnswer:
    """The twin's capacity answer for ``workload`` under ``slos`` (see the module);
    ``clock`` times it (the answer's ``seconds``)."""
    check_slos(slos)
    started = clock()
    workload = workload.model_copy(update={"max_concurrency": None})  # arrivals, not slots
    curve = _Curve(predictor, workload, slos, load_seconds)
    try:
        saturated = curve.at(math.inf)
    except _NoStart as exc:
        return CapacityAnswer(
            slos=slos,
            workload=workload,
            load_seconds=load_seconds,
            label=label or exc.prediction.label(),
            limit=Limit.NO_START,
            max_rate=0.0,
            low=0.0,
            high=0.0,
            failure=exc.prediction.failure,
            predictions=1,
            seconds=clock() - started,
            created=_now(),
        )
    top = saturated.served
    if not top > 0:
        raise CapacityError("the twin served no request of this workload")
    del curve.points[math.inf]  # the saturated run sizes the search; the curve is finite rates
    budget -= 1
    light, full = curve.ratio(top * LIGHT_SHARE), curve.ratio(top)
    if light > 1.0:
        limit, max_rate = Limit.UNMET, 0.0
    elif full <= 1.0:
        limit, max_rate = Limit.THROUGHPUT, top
    else:
        limit = Limit.SLO
        max_rate = _crossing(curve, 0.0, RATE_TOLERANCE * top, budget) or 0.0
    low = _edge(curve, +1.0, top, budget, fallback=0.0)
    high = _edge(curve, -1.0, top, budget, fallback=top)
    if limit is not Limit.UNMET:
        low, high = min(low, max_rate), max(high, max_rate)
        _fill(curve, top, max_rate, budget)
    assert curve.first is not None
    error = stated_interval(curve.first, next(iter(slos.limits)))
    return CapacityAnswer(
        slos=slos,
        workload=workload,
        load_seconds=load_seconds,
        label=label or curve.first.label(),
        limit=limit,
        max_rate=max_rate,
        low=low if limit is not Limit.UNMET else 0.0,
        high=high if limit is not Limit.UNMET else 0.0,
        saturation=top,
        error_pct=error,
        curve=sorted(curve.points.values(), key=lambda p: p.rate),
        predictions=curve.spent + 1,
        seconds=clock() - started,
        replicas=(
            replicas_for(target_rate, max_rate, low, high) if target_rate is not None else None
        ),
        created=_now(),
    )


def _edge(curve: _Curve, edge: float, top: float, budget: int, fallback: float) -> float:
    """One interval edge: where the SLOs cross at that edge of the twin's interval.

    Where the SLOs hold at saturation even at that edge, the throughput limits the rate, so
    the edge is the saturated throughput at its own interval's edge (``top`` alone would
    state no width at all: an answer of [1.02, 1.02] beside a ±67% validation).
    """
    if curve.ratio(top, edge) <= 1.0:
        return top * max(1.0 - edge * curve.served_error, 0.0)
    if curve.ratio(top * LIGHT_SHARE, edge) > 1.0:
        return 0.0 if edge > 0 else fallback
    found = _crossing(curve, edge, EDGE_TOLERANCE * top, budget)
    return found if found is not None else fallback


def _fill(curve: _Curve, top: float, max_rate: float, budget: int) -> None:
    """A few more points where the curve has none near (the plot needs its shape)."""
    wanted = [top * s for s in CURVE_SHARES]
    if max_rate > 0:
        wanted.append(min(top, max_rate * 1.3))
    for rate in wanted:
        if curve.spent >= budget:
            return
        if all(abs(rate - r) > NEAR_SHARE * top for r in curve.points):
            curve.at(rate)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def twin_capacity(
    profile: Profile,
    flags: ServeFlags,
    workload: LoadSpec,
    slos: SloLimits,
    *,
    server: RunRecord | None = None,
    target_rate: float | None = None,
    flags_name: str = "current",
    load_seconds: float | None = None,
) -> CapacityAnswer:
    """:func:`search` on ``profile``'s twin for ``flags`` (blocking: seconds; a thread);
    ``load_seconds``: each rate's load sized as ``--confirm``'s real one."""

    def on_twin(load: LoadSpec) -> Prediction:
        return predict(profile, flags, load, server)

    answer = search(on_twin, workload, slos, target_rate=target_rate, load_seconds=load_seconds)
    return answer.model_copy(update={"flags_name": flags_name, "model": flags.model})
