"""The board's judgement of one change: better, worse, within noise or a trade-off.

A run is judged against the baseline by two numbers (issue 39, item 3): the objective
(:data:`~.metrics.OBJECTIVE`, output throughput: what a sweep maximises by default) and the
*worst* SLO metric (:data:`~.metrics.SLO_METRICS`, the latencies an SLO bounds: the one
that moved furthest the wrong way, or, when none got worse beyond the noise, the one that
improved most). Each comparison carries the noise verdict of
:mod:`.noise` (its own direction, the noise band), so the judgement never calls a change
inside the noise a gain:

=====================  =====================  ===============
objective              worst SLO metric       judgement
=====================  =====================  ===============
gain                   no loss                better
loss                   no gain                worse
noise                  loss / gain / noise    worse / better / within noise
gain                   loss                   trade-off
loss                   gain, none worse       trade-off
=====================  =====================  ===============

The line reads ``better · out tok/s +2.8% · worst ITL p99 ~+1.0%``; a different workload is
``not compared (other load)``. The baseline, a run without a load and a failed start are
not judged (``None``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tui.domain.board.identity import same_run
from tui.domain.board.metrics import OBJECTIVE, SLO_METRICS, MetricSpec
from tui.domain.board.noise import Comparison, Groups, Verdict, compare
from tui.domain.results import RunRecord


class Judged(StrEnum):
    """What the change did, as a whole."""

    BETTER = "better"
    WORSE = "worse"
    NOISE = "within noise"
    TRADE_OFF = "trade-off"
    NOT_COMPARED = "not compared (other load)"


@dataclass(frozen=True)
class Judgement:
    """One change judged: the word, and the two comparisons it rests on (``worst``: the
    deciding SLO metric, :func:`deciding_slo`)."""

    judged: Judged
    objective: tuple[MetricSpec, Comparison]
    worst: tuple[MetricSpec, Comparison] | None = None

    def parts(self) -> list[tuple[str, Verdict | None]]:
        """The line in pieces, each with the verdict that colours it (``None``: plain)."""
        if self.judged is Judged.NOT_COMPARED:
            return [(self.judged.value, Verdict.OTHER_LOAD)]
        metric, comparison = self.objective
        out: list[tuple[str, Verdict | None]] = [
            (self.judged.value, _word_verdict(self.judged)),
            (" · ", None),
            (f"{metric.label} {change_text(comparison)}", comparison.verdict),
        ]
        if self.worst is not None:
            metric, comparison = self.worst
            word = "" if comparison.verdict is Verdict.GAIN else "worst "  # all improved: the best
            text = f"{word}{metric.label} {change_text(comparison)}"
            out += [(" · ", None), (text, comparison.verdict)]
        return out

    def text(self) -> str:
        """``better · out tok/s +2.8% · worst TTFT p99 ~+1.0%``."""
        return "".join(text for text, _ in self.parts())


def change_text(comparison: Comparison) -> str:
    """``+2.8%``, ``~+0.4%`` inside the noise, ``n/a`` without a number."""
    if comparison.percent is None:
        return "n/a"
    change = f"{comparison.percent:+.1f}%"
    return "~" + change if comparison.verdict is Verdict.NOISE else change


def _word_verdict(judged: Judged) -> Verdict | None:
    """The colour of the judgement's word: a gain's, a loss's, noise's; a trade-off plain."""
    return {
        Judged.BETTER: Verdict.GAIN,
        Judged.WORSE: Verdict.LOSS,
        Judged.NOISE: Verdict.NOISE,
    }.get(judged)


def judge(run: RunRecord, baseline: RunRecord | None, groups: Groups) -> Judgement | None:
    """``run`` against ``baseline`` by the objective and the worst SLO metric (module
    docstring); ``None`` for the baseline itself, without one, or without a measured load."""
    if baseline is None or same_run(run, baseline) or run.bench is None:
        return None
    objective = compare(OBJECTIVE, run, baseline, groups)
    if objective.value is None or objective.reference is None:
        return None
    if objective.verdict is Verdict.OTHER_LOAD:
        return Judgement(Judged.NOT_COMPARED, (OBJECTIVE, objective))
    latencies = [(m, compare(m, run, baseline, groups)) for m in SLO_METRICS]
    worst = deciding_slo([(m, c) for m, c in latencies if c.percent is not None])
    return Judgement(_verdict(objective.verdict, worst), (OBJECTIVE, objective), worst)


def deciding_slo(
    compared: list[tuple[MetricSpec, Comparison]],
) -> tuple[MetricSpec, Comparison] | None:
    """The SLO metric that decides: the one that moved furthest the wrong way when any got
    worse beyond the noise; else the most improved when any got better; else the worst."""

    def worse_by(item: tuple[MetricSpec, Comparison]) -> float:
        metric, comparison = item
        percent = comparison.percent or 0.0
        return -percent if metric.higher_is_better else percent

    losses = [i for i in compared if i[1].verdict is Verdict.LOSS]
    gains = [i for i in compared if i[1].verdict is Verdict.GAIN]
    if losses:
        return max(losses, key=worse_by)
    if gains:
        return min(gains, key=worse_by)
    return max(compared, key=worse_by, default=None)


def _verdict(objective: Verdict, worst: tuple[MetricSpec, Comparison] | None) -> Judged:
    latency = worst[1].verdict if worst is not None else Verdict.NOISE
    if objective is Verdict.GAIN:
        return Judged.TRADE_OFF if latency is Verdict.LOSS else Judged.BETTER
    if objective is Verdict.LOSS:
        return Judged.TRADE_OFF if latency is Verdict.GAIN else Judged.WORSE
    return {Verdict.LOSS: Judged.WORSE, Verdict.GAIN: Judged.BETTER}.get(latency, Judged.NOISE)
