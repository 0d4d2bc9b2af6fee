"""How much traffic a server holds at its SLOs: the twin's curve, the answer, the real loads.

A capacity answer is a curve first: the twin's latency-versus-request-rate curve for one
workload (:class:`CurvePoint`: a rate and the SLO statistics the twin predicts there), the
highest rate at which every SLO holds (``max_rate``), and the interval the twin's stated
error implies for it: the rates at which the SLO statistics' interval edges cross the SLO
(the pessimistic edge, each statistic ``(1 + e)`` times the prediction, gives ``low``; the
optimistic edge, ``(1 - e)`` times, gives ``high``). Then at most three real loads confirm
or correct it (:class:`RealLoad`, :func:`next_confirm_rate`): one at the predicted rate,
one :data:`ABOVE` times it, and a third only when those two disagree with the prediction,
at the rate the measured error moves the twin's curve to. What is measured is stated as
measured: ``confirmed_rate`` is the highest rate a real load met every SLO at.

Each load at a finite rate may be bounded in time (:func:`sized_prompts`): ``rate x
load_seconds`` requests, at least :data:`LEAST_PROMPTS` and at most the workload's own
count, so a slow server's loads at low rates do not run for half an hour each. The twin's
curve is drawn for the same sized loads the real server then runs (:meth:`CapacityAnswer.load_at`).

Pure: records and decisions, no twin and no I/O (:mod:`tui.twin.capacity` searches, the
modes run the real loads).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from tui.domain.sweep.slo import SloLimits
from tui.domain.workload import LoadSpec

ABOVE = 1.3
"""The second real load runs this many times the predicted rate: it must miss the SLOs."""
MOST_REAL_LOADS = 3
"""Real loads ``--confirm`` may spend (GuideLLM's sweep: 12)."""
LEAST_PROMPTS = 20
"""The fewest requests a load sized by its time sends: a p99 over fewer means little."""
LOAD_SECONDS = 120.0
"""``vtc capacity``'s time per load (``--load-seconds``): it binds only below
``num_prompts / LOAD_SECONDS`` req/s (200 / 120 = 1.7 req/s at the defaults)."""


def sized_prompts(rate: float, seconds: float | None, most: int, least: int = LEAST_PROMPTS) -> int:
    """The requests of one load at ``rate`` req/s lasting about ``seconds``.

    ``round(rate * seconds)``, at least ``least`` (never more than ``most``) and at most
    ``most``; ``most`` itself at an infinite rate (the load is paced by the server, not the
    arrivals) or without a time (``seconds`` ``None``). A load at a low rate may outlast
    ``seconds``: ``least / rate``.
    """
    if seconds is None or not (math.isfinite(rate) and math.isfinite(seconds)):
        return most
    return max(min(least, most), min(most, round(rate * seconds)))


def sized_load(workload: LoadSpec, rate: float, seconds: float | None) -> LoadSpec:
    """``workload`` at ``rate`` req/s with :func:`sized_prompts` of its requests."""
    prompts = sized_prompts(rate, seconds, workload.num_prompts)
    return workload.model_copy(update={"request_rate": rate, "num_prompts": prompts})


class Limit(StrEnum):
    """What bounds the answer."""

    SLO = "slo"  # the SLOs are met below max_rate and missed above it
    THROUGHPUT = "throughput"  # met even at the server's saturated throughput: that caps it
    UNMET = "unmet"  # missed even at the lightest rate tried: no rate holds
    NO_START = "no_start"  # the twin says these flags do not start


class CurvePoint(BaseModel):
    """One point of the twin's curve: an offered rate and the SLO statistics there."""

    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")

    rate: float  # offered request rate, req/s
    stats: dict[str, float] = Field(default_factory=dict)  # SLO key -> predicted ms
    served: float = 0.0  # the request throughput the twin served, req/s

    def ratio(self, slos: SloLimits, scale: float = 1.0) -> float:
        """The worst statistic over its limit (``<= 1``: every SLO met), each statistic
        ``scale`` times the prediction (an interval edge)."""
        worst = 0.0
        for key, limit in slos.limits.items():
            value = self.stats.get(key)
            if value is None or not math.isfinite(value):
                return math.inf
            worst = max(worst, scale * value / limit)
        return worst


class Replicas(BaseModel):
    """How many servers a target rate needs: ``ceil(target / max_rate)``, with the range
    the interval implies (``None``: unbounded, no rate holds at that edge)."""

    model_config = ConfigDict(frozen=True)

    target_rate: float
    needed: int | None
    low: int | None  # at the interval's high rate
    high: int | None  # at the interval's low rate


def replicas_for(target: float, max_rate: float, low: float, high: float) -> Replicas:
    """:class:`Replicas` for ``target`` req/s at ``max_rate`` (interval ``[low, high]``)."""

    def count(rate: float) -> int | None:
        return math.ceil(target / rate - 1e-9) if rate > 0 else None

    return Replicas(target_rate=target, needed=count(max_rate), low=count(high), high=count(low))


class RealLoad(BaseModel):
    """One real load ``--confirm`` ran: its rate, the measured SLO statistics, the run."""

    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")

    rate: float
    stats: dict[str, float] = Field(default_factory=dict)  # SLO key -> measured ms
    met: bool
    served: float = 0.0  # measured request throughput, req/s
    run_id: int | None = None  # the run it is on the board as
    requests: int | None = None  # the requests it sent (its sized num_prompts)
    predicted_ratio: float | None = None  # the twin's worst statistic/limit at this rate


class CapacityAnswer(BaseModel):
    """The twin's answer for one command line, workload and set of SLOs (and, after
    ``--confirm``, what the real server said)."""

    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")

    label: str  # the twin's label: ``predicted (twin NAME r2, ±12% validation)``
    flags_name: str = "current"  # "current", "baseline #4", "form"...
    model: str = ""
    slos: SloLimits
    workload: LoadSpec  # num_prompts: the most requests of one load
    load_seconds: float | None = None  # each load's time (sized_prompts); None: unbounded
    limit: Limit
    max_rate: float  # req/s; 0 when no rate holds
    low: float  # the interval's low edge, req/s
    high: float  # the interval's high edge, req/s
    saturation: float = 0.0  # the request throughput the twin serves at an unbounded rate
    error_pct: float | None = None  # the stated interval used (None: not validated)
    curve: list[CurvePoint] = Field(default_factory=list)
    predictions: int = 0  # twin runs it took
    seconds: float = 0.0  # wall time of the twin's answer
    failure: str | None = None  # Limit.NO_START: vLLM's reason
    replicas: Replicas | None = None
    real_loads: list[RealLoad] = Field(default_factory=list)
    created: str = ""  # ISO UTC

    @property
    def confirmed_rate(self) -> float | None:
        """The highest rate a real load met every SLO at (``None``: none did, or no load)."""
        met = [r.rate for r in self.real_loads if r.met]
        return max(met) if met else None

    def load_at(self, rate: float) -> LoadSpec:
        """The load the answer stands for at ``rate``: the workload, sized by
        ``load_seconds`` (the twin's point there and the real load that confirms it)."""
        return sized_load(self.workload, rate, self.load_seconds)

    def sizing(self) -> str:
        """``200 requests per load``, or ``rate x 120 s requests per load (20-200)``."""
        most = self.workload.num_prompts
        if self.load_seconds is None or not math.isfinite(self.load_seconds):
            return f"{most} requests per load"
        least = min(LEAST_PROMPTS, most)
        return f"rate x {self.load_seconds:g} s requests per load ({least}-{most})"

    def predicted_ratio(self, rate: float) -> float:
        """The twin's worst statistic over its limit at ``rate``, read off the curve
        (linear between its points; the ends held)."""
        points = sorted(self.curve, key=lambda p: p.rate)
        if not points:
            return math.nan
        ratios = [p.ratio(self.slos) for p in points]
        if rate <= points[0].rate:
            return ratios[0]
        for (a, ra), (b, rb) in zip(
            zip(points, ratios, strict=True), zip(points[1:], ratios[1:], strict=True), strict=False
        ):
            if rate <= b.rate:
                share = (rate - a.rate) / (b.rate - a.rate) if b.rate > a.rate else 1.0
                return ra + share * (rb - ra)
        return ratios[-1]

    def corrected_rate(self, load: RealLoad) -> float | None:
        """The rate the twin's curve, scaled by how far ``load`` was from it, crosses the
        SLOs at (``None``: nothing to scale by)."""
        predicted = self.predicted_ratio(load.rate)
        measured = max(
            (load.stats.get(k, math.inf) / v for k, v in self.slos.limits.items()), default=math.nan
        )
        if not (predicted > 0 and math.isfinite(predicted) and math.isfinite(measured)):
            return None
        scale = measured / predicted
        points = sorted(self.curve, key=lambda p: p.rate)
        below = [p for p in points if p.ratio(self.slos) * scale <= 1.0]
        above = [p for p in points if p.ratio(self.slos) * scale > 1.0]
        if not below:
            return points[0].rate / ABOVE if points else None
        top = max(below, key=lambda p: p.rate)
        nxt = min((p for p in above if p.rate > top.rate), key=lambda p: p.rate, default=None)
        if nxt is None:
            return top.rate
        ra, rb = top.ratio(self.slos) * scale, nxt.ratio(self.slos) * scale
        share = (1.0 - ra) / (rb - ra) if rb > ra else 0.0
        return top.rate + share * (nxt.rate - top.rate)

    def verdict(self) -> str:
        """What the real loads said of the prediction, in one line ("" before any)."""
        if not self.real_loads:
            return ""
        runs = ", ".join(
            f"{r.rate:.3g} req/s {'met' if r.met else 'missed'}"
            + (f" (#{r.run_id})" if r.run_id is not None else "")
            for r in self.real_loads
        )
        confirmed = self.confirmed_rate
        agree = confirms(self)
        if agree:
            head = f"confirmed: the real server holds {self.max_rate:.3g} req/s and not {ABOVE}x it"
        elif confirmed is not None:
            head = f"corrected: measured to hold {confirmed:.3g} req/s"
        else:
            head = "corrected: no rate measured holds the SLOs"
        return f"{head} (measured, {len(self.real_loads)} real loads: {runs})"

    def summary(self) -> str:
        """``max 4.2 req/s (3.8-4.6) at p99_ttft_ms <= 500``: one line."""
        slo = self.slos.describe()
        if self.limit is Limit.NO_START:
            return f"will NOT start: {self.failure or 'unknown reason'}"
        if self.limit is Limit.UNMET:
            lightest = min((p.rate for p in self.curve), default=0.0)
            return f"no rate meets {slo} (missed even at {lightest:.3g} req/s)"
        capped = " (capped by the server's throughput)" if self.limit is Limit.THROUGHPUT else ""
        return (
            f"max {self.max_rate:.3g} req/s (interval {self.low:.3g}-{self.high:.3g}) "
            f"at {slo}{capped}"
        )

    def replicas_line(self) -> str:
        """``12 replicas for 40 req/s (10-14)`` ("" without a target)."""
        r = self.replicas
        if r is None:
            return ""
        if r.needed is None:
            return f"replicas for {r.target_rate:g} req/s: none holds the SLOs"

        def show(n: int | None) -> str:
            return "unbounded" if n is None else str(n)

        return (
            f"{r.needed} replicas for {r.target_rate:g} req/s "
            f"(interval {show(r.low)}-{show(r.high)})"
        )

    def to_json(self) -> dict[str, object]:
        """The keys scripts rely on (``max_rate``, ``interval``, ``curve``, ``replicas``,
        ``confirmed_rate``, ``real_loads``) and the rest of the record."""
        out: dict[str, object] = {
            "max_rate": self.max_rate,
            "interval": [self.low, self.high],
            "limit": self.limit.value,
            "saturation_rate": self.saturation,
            "slo": dict(self.slos.limits),
            "label": self.label,
            "flags": self.flags_name,
            "model": self.model,
            "error_pct": self.error_pct,
            "workload": self.workload.model_dump(mode="json", exclude={"request_rate"}),
            "load_seconds": self.load_seconds,
            "curve": [{"rate": p.rate, **_finite(p.stats)} for p in self.curve],
            "predictions": self.predictions,
            "seconds": self.seconds,
        }
        if self.failure:
            out["failure"] = self.failure
        if self.replicas is not None:
            out["replicas"] = self.replicas.model_dump()
        if self.real_loads:
            out["confirmed_rate"] = self.confirmed_rate
            out["real_loads"] = [
                {**r.model_dump(mode="json", exclude={"stats"}), **_finite(r.stats)}
                for r in self.real_loads
            ]
            out["verdict"] = self.verdict()
        return out


def _finite(stats: dict[str, float]) -> dict[str, float | None]:
    """``stats`` for JSON: a statistic not measured (infinite) is null."""
    return {k: v if math.isfinite(v) else None for k, v in stats.items()}


def confirms(answer: CapacityAnswer) -> bool:
    """The real loads agree with the prediction: met at ``max_rate``, missed above it."""
    at = [r for r in answer.real_loads if math.isclose(r.rate, answer.max_rate, rel_tol=1e-3)]
    above = [r for r in answer.real_loads if r.rate > answer.max_rate * (1 + 1e-3)]
    return bool(at) and all(r.met for r in at) and bool(above) and not any(r.met for r in above)


def next_confirm_rate(answer: CapacityAnswer) -> float | None:
    """The rate of the next real load ``--confirm`` runs (``None``: settled).

    First the predicted rate, then :data:`ABOVE` times it; a third load only when those two
    disagree with the prediction: at the rate the twin's curve crosses the SLOs once scaled
    by the measured error, when that rate was not measured already.
    """
    loads: Sequence[RealLoad] = answer.real_loads
    if answer.max_rate <= 0 or len(loads) >= MOST_REAL_LOADS:
        return None
    if not loads:
        return answer.max_rate
    if len(loads) == 1:
        return answer.max_rate * ABOVE
    if confirms(answer):
        return None
    wrong = loads[0] if not loads[0].met else loads[1]
    return _between(answer.corrected_rate(wrong), loads)


def _between(rate: float | None, loads: Sequence[RealLoad]) -> float | None:
    """``rate`` when it lies between the highest rate measured to hold and the lowest
    measured to miss; else a step of :data:`ABOVE` out of that span (``None``: nothing
    left to learn: the measurements contradict each other, or it was measured)."""
    lo = max((r.rate for r in loads if r.met), default=0.0)
    hi = min((r.rate for r in loads if not r.met), default=math.inf)
    if lo >= hi:
        return None  # met above a miss: noise; what was measured stands
    if rate is None or not lo < rate < hi:
        rate = lo * ABOVE if math.isinf(hi) else hi / ABOVE if lo == 0 else (lo + hi) / 2
    if any(math.isclose(rate, r.rate, rel_tol=0.02) for r in loads):
        return None
    return rate
