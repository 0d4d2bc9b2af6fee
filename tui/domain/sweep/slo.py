"""Service-level objectives on bench serve's numbers, the objective, and one verdict.

Limits are upper bounds on the statistics ``vllm bench serve`` reports, named by its JSON
keys (``p99_e2el_ms``, ``mean_ttft_ms``, ``p90_itl_ms``...; reference section 4.2), plus a
floor on the prefix-cache hit rate the server reports over the load (``vllm:prefix_cache_
hits`` / ``queries``, section 3). The statistics are those vtc's load generator reports:
mean, median and the 50th, 90th and 99th percentiles (its ``DEFAULT_PERCENTILES``).
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tui.domain.results import BenchResult

STATS = ("mean", "median", "p50", "p90", "p99")
METRICS = ("ttft", "tpot", "itl", "e2el")
GOODPUT_METRICS = ("ttft", "tpot", "e2el")  # bench serve's --goodput keys (serve.py:1473-1508)
_KEY = re.compile(r"^(mean|median|p50|p90|p99)_(ttft|tpot|itl|e2el)_ms$")

Objective = Literal["request_throughput", "output_throughput", "goodput"]
"""What a sweep maximises: bench serve's ``request_throughput``, ``output_throughput``, or
``request_goodput`` (requests per second that met the goodput SLOs)."""

OBJECTIVE_KEYS: dict[str, str] = {
    "request_throughput": "request_throughput",
    "output_throughput": "output_throughput",
    "goodput": "request_goodput",
}
OBJECTIVE_UNITS: dict[str, str] = {
    "request_throughput": "req/s",
    "output_throughput": "tok/s",
    "goodput": "good req/s",
}


def objective_value(objective: Objective, bench: BenchResult) -> float:
    """The objective's number in ``bench`` (0 when the result lacks it)."""
    value = bench.metric(OBJECTIVE_KEYS[objective])
    return float(value) if value is not None and math.isfinite(value) else 0.0


class SloVerdict(BaseModel):
    """Whether one measurement met every limit, and by how much it missed or cleared them.

    ``margin`` is the worst relative excess over all limits: ``value / limit - 1`` for an
    upper bound, ``1 - hit / floor`` for the hit-rate floor; ``<= 0`` means met.
    """

    model_config = ConfigDict(frozen=True)

    met: bool
    violations: tuple[str, ...] = ()
    margin: float = -1.0


class SloLimits(BaseModel):
    """Upper bounds by bench serve key (ms) and an optional prefix-cache hit floor (%).

    In TOML the keys sit side by side: ``p99_e2el_ms = 13000``, ``min_prefix_cache_hit_pct
    = 30``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    limits: dict[str, float] = Field(default_factory=dict)
    min_prefix_cache_hit_pct: float | None = Field(default=None, ge=0, le=100)

    @model_validator(mode="before")
    @classmethod
    def _flat(cls, data: Any) -> Any:
        """Accept the flat TOML table: every ``*_ms`` key is a limit."""
        if not isinstance(data, dict) or "limits" in data:
            return data
        limits = {k: v for k, v in data.items() if str(k).endswith("_ms")}
        rest = {k: v for k, v in data.items() if not str(k).endswith("_ms")}
        return {**rest, "limits": limits}

    @model_validator(mode="after")
    def _known(self) -> SloLimits:
        for key, value in self.limits.items():
            if not _KEY.match(key):
                stats, metrics = "/".join(STATS), "/".join(METRICS)
                raise ValueError(f"unknown SLO {key!r}: expected <{stats}>_<{metrics}>_ms")
            if not value > 0:
                raise ValueError(f"SLO {key} must be > 0 ms, got {value}")
        return self

    @property
    def empty(self) -> bool:
        """No limit at all (every measurement meets it)."""
        return not self.limits and self.min_prefix_cache_hit_pct is None

    def verdict(self, bench: BenchResult, prefix_hit_pct: float | None) -> SloVerdict:
        """``bench`` against every limit; a missing statistic counts as a violation."""
        violations: list[str] = []
        margin = -math.inf
        for key, limit in sorted(self.limits.items()):
            value = bench.metric(key)
            if value is None:
                violations.append(f"{key} not measured")
                margin = max(margin, math.inf)
                continue
            margin = max(margin, value / limit - 1.0)
            if value > limit:
                violations.append(f"{key} {value:.0f} > {limit:.0f}")
        floor = self.min_prefix_cache_hit_pct
        if floor is not None and floor > 0:
            if prefix_hit_pct is None:
                violations.append("prefix-cache hit rate not measured")
                margin = max(margin, math.inf)
            else:
                margin = max(margin, 1.0 - prefix_hit_pct / floor)
                if prefix_hit_pct < floor:
                    violations.append(f"prefix hit {prefix_hit_pct:.1f}% < {floor:g}%")
        if margin == -math.inf:
            margin = -1.0
        return SloVerdict(met=not violations, violations=tuple(violations), margin=margin)

    def goodput_defaults(self) -> dict[str, float]:
        """bench serve ``--goodput`` thresholds from the p99 limits (``e2el:13000``...)."""
        out: dict[str, float] = {}
        for metric in GOODPUT_METRICS:
            key = f"p99_{metric}_ms"
            if key in self.limits:
                out[metric] = self.limits[key]
        return out

    def describe(self) -> str:
        """``p99_e2el_ms <= 13000, prefix hit >= 30%`` (``none`` when empty)."""
        parts = [f"{k} <= {v:g}" for k, v in sorted(self.limits.items())]
        if self.min_prefix_cache_hit_pct:
            parts.append(f"prefix hit >= {self.min_prefix_cache_hit_pct:g}%")
        return ", ".join(parts) or "none"
