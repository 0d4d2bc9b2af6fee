"""Like for like, repeats and noise: when a delta on the board is a gain and when it is not.

**Like for like.** Two runs compare like for like when they ran the same workload (every
:class:`~tui.domain.workload.LoadSpec` field) on the same machine (GPU model and count, vLLM
version, where both runs recorded them). Otherwise the delta is shown but marked
``other load`` and never called a gain or a loss: 200 prompts against 32 measure different
things.

**Groups.** Runs with the same effective flags (the server's address, port and served name
excluded: they do not change what is measured) and the same setting form a group: repeats.
A group's *spread* for a metric is the closed interval ``[min, max]`` of its runs' values.

**The rule.** A delta of run A against baseline B is *noise* when A and B are in the same
group (nothing differs but the run), when A's group's spread and B's group's spread overlap,
or when the change is inside the board's *noise band* for that metric. Only beyond all three
is it a *gain* or a *loss*, by the metric's direction.

**The noise band** (:meth:`Groups.band`) is the widest relative spread any group of repeats
on the board has shown for the metric, and never less than :data:`NOISE_FLOOR_PCT`: with
single runs the spreads are points, and a TTFT p99 0.4% lower is not a gain (issue 39: it
was coloured like one). ``confirmed`` stays false until both sides have been repeated:
repeat a run (same flags, same workload) to learn the machine's noise. min/max is used
rather than a t-interval because groups are small (2-5 runs) and a busy machine's noise is
not normal; adding a repeat can only widen a spread and the band, so it can turn a gain into
noise but never noise into a gain.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tui.domain.board.identity import same_run
from tui.domain.board.metrics import MetricSpec
from tui.domain.flags.serve import FlagGroup, flag_specs
from tui.domain.results import RunRecord
from tui.domain.workload import LoadSpec

#: The narrowest noise band, in percent of the baseline's value: about a real measurement's
#: own repeat spread on a quiet machine (the twin's default tolerance, ``[twin] tolerance``,
#: is the same 2%). A board whose repeats spread wider uses their spread instead.
NOISE_FLOOR_PCT = 2.0

# Flags that change where the server listens, not what it measures.
_NOT_MEASURED = frozenset(s.name for s in flag_specs() if s.group is FlagGroup.SERVER)


@dataclass(frozen=True)
class Setting:
    """What a run was measured under besides its flags: the workload and the machine."""

    workload: LoadSpec | None
    gpu_name: str | None = None
    gpu_count: int | None = None
    vllm_version: str | None = None


def setting_of(run: RunRecord) -> Setting:
    """The workload and machine ``run`` was measured under (machine from its reproduction)."""
    repro = run.repro
    if repro is None:
        return Setting(run.workload)
    return Setting(run.workload, repro.gpu_name, repro.gpu_count, repro.vllm_version)


@dataclass(frozen=True)
class LikeForLike:
    """Whether two runs compare like for like, and if not, why (one reason per difference)."""

    ok: bool
    reasons: tuple[str, ...] = ()


def like_for_like(a: RunRecord, b: RunRecord, *, other: str = "baseline") -> LikeForLike:
    """Whether ``a`` and ``b`` ran the same model and workload on the same machine; each
    reason names what differs as the operator reads it (``b`` is called ``other``):
    ``baseline has no load``, ``other workload: input 128 vs 256``, ``other model: X vs Y``."""
    reasons = [
        *_model_reasons(a, b),
        *_workload_reasons(a.workload, b.workload, other),
        *_machine_reasons(a, b),
    ]
    return LikeForLike(not reasons, tuple(reasons))


def _model_reasons(a: RunRecord, b: RunRecord) -> list[str]:
    if a.flags.model == b.flags.model:
        return []
    return [f"other model: {a.flags.model} vs {b.flags.model}"]


#: How a workload field reads in a reason (``other workload: input 128 vs 256``).
_WORKLOAD_WORDS: dict[str, str] = {
    "input_len": "input",
    "output_len": "output",
    "num_prompts": "prompts",
    "max_concurrency": "concurrency",
    "request_rate": "rate",
    "prefix_len": "prefix",
    "range_ratio": "range",
}


def _workload_reasons(a: LoadSpec | None, b: LoadSpec | None, other: str) -> list[str]:
    if a == b:
        return []
    if b is None:
        return [f"{other} has no load"]
    if a is None:
        return ["this run has no load"]
    old, new = a.model_dump(), b.model_dump()
    diffs = [f"{_WORKLOAD_WORDS.get(k, k)} {old[k]} vs {new[k]}" for k in old if old[k] != new[k]]
    return ["other workload: " + ", ".join(diffs)]


def _machine_reasons(a: RunRecord, b: RunRecord) -> list[str]:
    if a.repro is None or b.repro is None:
        return []
    reasons = []
    for field, what in (("gpu_name", "GPU"), ("gpu_count", "GPU count"), ("vllm_version", "vLLM")):
        x, y = getattr(a.repro, field), getattr(b.repro, field)
        if x is not None and y is not None and x != y:
            reasons.append(f"other machine: {what} {x} vs {y}")
    return reasons


def config_key(run: RunRecord) -> tuple[Any, ...]:
    """What makes two runs repeats of each other: effective flags and setting."""
    flags = run.flags
    values = tuple(flags.effective(s.name) for s in flag_specs() if s.name not in _NOT_MEASURED)
    setting = setting_of(run)
    workload = setting.workload.model_dump_json() if setting.workload is not None else None
    return (
        flags.model,
        values,
        flags.extra_args,
        flags.env,
        workload,
        setting.gpu_name,
        setting.gpu_count,
        setting.vllm_version,
    )


@dataclass(frozen=True)
class Spread:
    """The closed interval ``[low, high]`` of a group's values for one metric, over ``n`` runs."""

    low: float
    high: float
    n: int

    @property
    def relative_pct(self) -> float:
        """The width in percent of the larger end (0 for a point or an all-zero spread)."""
        scale = max(abs(self.low), abs(self.high))
        return (self.high - self.low) / scale * 100.0 if scale else 0.0

    def overlaps(self, other: Spread) -> bool:
        """Whether the two intervals share a point."""
        return self.low <= other.high and other.low <= self.high

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread | None:
        """The spread of ``values``; ``None`` when there are none."""
        seen = list(values)
        return cls(min(seen), max(seen), len(seen)) if seen else None


class Groups:
    """Runs grouped by :func:`config_key` (repeats of the same configuration).

    Keys and spreads are computed once per run and per (group, metric): the console
    rebuilds the board after every change, over up to the history's 200 runs.
    """

    def __init__(self, runs: Sequence[RunRecord]) -> None:
        # by id(), holding the run too: an id is only unique while its object lives
        self._keys: dict[int, tuple[RunRecord, tuple[Any, ...]]] = {}
        self._by_key: dict[tuple[Any, ...], list[RunRecord]] = {}
        self._spreads: dict[tuple[tuple[Any, ...], str], Spread | None] = {}
        self._bands: dict[str, float] = {}
        for run in runs:
            self._by_key.setdefault(self.key(run), []).append(run)

    def key(self, run: RunRecord) -> tuple[Any, ...]:
        """:func:`config_key` of ``run``, cached (records are not changed in place)."""
        cached = self._keys.get(id(run))
        if cached is None or cached[0] is not run:
            cached = self._keys[id(run)] = (run, config_key(run))
        return cached[1]

    def members(self, run: RunRecord) -> tuple[RunRecord, ...]:
        """The runs in ``run``'s group (itself included, if it was grouped)."""
        return tuple(self._by_key.get(self.key(run), (run,)))

    def spread(self, run: RunRecord, metric: MetricSpec) -> Spread | None:
        """The spread of ``metric`` over ``run``'s group (its served runs with a value)."""
        key = self.key(run)
        if key not in self._by_key:
            value = metric.value(run) if run.served else None
            return Spread.of([value] if value is not None else [])
        slot = (key, metric.key)
        if slot not in self._spreads:
            values = (metric.value(m) for m in self._by_key[key] if m.served)
            self._spreads[slot] = Spread.of(v for v in values if v is not None)
        return self._spreads[slot]

    def band(self, metric: MetricSpec) -> float:
        """The noise band of ``metric`` in percent: the widest relative spread of any group
        of repeats, at least :data:`NOISE_FLOOR_PCT` (module docstring)."""
        if metric.key not in self._bands:
            widths = (
                spread.relative_pct
                for group in self.repeated()
                if (spread := self.spread(group[0], metric)) is not None
            )
            self._bands[metric.key] = max(NOISE_FLOOR_PCT, max(widths, default=0.0))
        return self._bands[metric.key]

    def repeated(self) -> list[tuple[RunRecord, ...]]:
        """The groups with more than one run, oldest first."""
        return [tuple(g) for g in self._by_key.values() if len(g) > 1]


class Verdict(StrEnum):
    """What a delta against the baseline means."""

    BASELINE = "baseline"
    GAIN = "gain"
    LOSS = "loss"
    NOISE = "noise"
    OTHER_LOAD = "other load"
    NA = "n/a"


@dataclass(frozen=True)
class Comparison:
    """One metric of one run against the baseline: values, change in percent, verdict."""

    value: float | None
    reference: float | None
    percent: float | None
    verdict: Verdict
    confirmed: bool = False  # both sides repeated: the verdict rests on measured noise


def percent_change(value: float, reference: float) -> float | None:
    """``(value - reference) / |reference|`` in percent; ``None`` against zero."""
    if reference == 0:
        return None
    return (value - reference) / abs(reference) * 100.0


def compare(
    metric: MetricSpec, run: RunRecord, baseline: RunRecord | None, groups: Groups
) -> Comparison:
    """``run``'s ``metric`` against ``baseline`` under the module's rule."""
    value = metric.value(run)
    if baseline is None:
        return Comparison(value, None, None, Verdict.NA)
    reference = metric.value(baseline)
    if same_run(run, baseline):
        return Comparison(value, reference, 0.0 if value is not None else None, Verdict.BASELINE)
    if value is None or reference is None:
        return Comparison(value, reference, None, Verdict.NA)
    percent = percent_change(value, reference)
    if not like_for_like(run, baseline).ok:
        return Comparison(value, reference, percent, Verdict.OTHER_LOAD)
    if groups.key(run) == groups.key(baseline):
        return Comparison(value, reference, percent, Verdict.NOISE, confirmed=True)
    mine, theirs = groups.spread(run, metric), groups.spread(baseline, metric)
    mine = mine or Spread(value, value, 1)
    theirs = theirs or Spread(reference, reference, 1)
    confirmed = mine.n > 1 and theirs.n > 1
    inside = percent is not None and abs(percent) <= groups.band(metric)
    if inside or mine.overlaps(theirs):
        return Comparison(value, reference, percent, Verdict.NOISE, confirmed)
    better = (value > reference) == metric.higher_is_better
    return Comparison(
        value, reference, percent, Verdict.GAIN if better else Verdict.LOSS, confirmed
    )
