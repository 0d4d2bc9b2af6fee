"""Seed 003's Before / After table for any two runs: each metric, both values, the change.

The change reads as the seed writes it: a latency that fell is "61.5% faster", a throughput
that rose is "88.9% increase". Each row also carries the :class:`~.noise.Comparison`, so a
change inside the runs' noise or between different workloads says so instead of claiming
a gain. Rows come worse first (issue 39: "0.4% faster" led while ITL p99 +24.1% was left
out): the losses, furthest first; the gains; then what stayed inside the noise; metrics
neither run has are left out. The :class:`~.judgement.Judgement` heads the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tui.domain.board.baseline import run_label
from tui.domain.board.judgement import Judgement, judge
from tui.domain.board.metrics import BEFORE_AFTER_METRICS, MetricSpec
from tui.domain.board.noise import Comparison, Groups, LikeForLike, Verdict, compare, like_for_like
from tui.domain.flags.serve_diff import FlagChange, diff_flags
from tui.domain.results import RunRecord


@dataclass(frozen=True)
class BeforeAfterRow:
    """One metric: the comparison of *after* against *before*."""

    metric: MetricSpec
    comparison: Comparison

    @property
    def change(self) -> str:
        """``61.5% faster``, ``88.9% increase``, ``no change``, ``N/A``; noise marked."""
        text = change_words(self.metric, self.comparison.percent)
        verdict = self.comparison.verdict
        if verdict in (Verdict.NOISE, Verdict.OTHER_LOAD) and self.comparison.percent:
            text += f" ({verdict.value})"
        return text


def change_words(metric: MetricSpec, percent: float | None) -> str:
    """A relative change in seed 003's words for ``metric``'s direction."""
    if percent is None:
        return "N/A"
    if round(percent, 1) == 0:
        return "no change"
    size = f"{abs(percent):.1f}%"
    if metric.unit == "ms":  # a latency: lower is faster
        return f"{size} {'slower' if percent > 0 else 'faster'}"
    return f"{size} {'increase' if percent > 0 else 'decrease'}"


@dataclass(frozen=True)
class BeforeAfter:
    """Two runs side by side: the metrics, what flags changed, and whether like for like."""

    before: RunRecord
    after: RunRecord
    rows: tuple[BeforeAfterRow, ...]
    flag_changes: tuple[FlagChange, ...]
    like_for_like: LikeForLike
    judgement: Judgement | None = None

    @property
    def title(self) -> str:
        """``#3 → #7``."""
        return f"{run_label(self.before)} → {run_label(self.after)}"


def before_after(
    before: RunRecord,
    after: RunRecord,
    *,
    groups: Groups | None = None,
    metrics: Sequence[MetricSpec] = BEFORE_AFTER_METRICS,
) -> BeforeAfter:
    """``after`` against ``before``: ``groups`` (of the whole board) supply the noise."""
    groups = groups if groups is not None else Groups([before, after])
    rows = [BeforeAfterRow(m, compare(m, after, before, groups)) for m in metrics]
    shown = [
        r for r in rows if r.comparison.value is not None or r.comparison.reference is not None
    ]
    return BeforeAfter(
        before=before,
        after=after,
        rows=tuple(sorted(shown, key=_worse_first)),
        flag_changes=tuple(diff_flags(before.flags, after.flags)),
        like_for_like=like_for_like(before, after, other="after"),
        judgement=judge(after, before, groups),
    )


_ORDER = {Verdict.LOSS: 0, Verdict.GAIN: 1}  # then noise, other load, n/a: as declared


def _worse_first(row: BeforeAfterRow) -> tuple[int, float]:
    """Losses first (furthest the wrong way first), then gains (largest first), then the
    rest in the declared order (``sorted`` is stable)."""
    c = row.comparison
    rank = _ORDER.get(c.verdict, 2)
    if rank == 2 or c.percent is None:
        return (rank, 0.0)
    return (rank, -abs(c.percent))
