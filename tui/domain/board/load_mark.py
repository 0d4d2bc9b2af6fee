"""Whether a run's load finished whole: ``cancelled`` (stopped early) or ``partial`` (some
requests failed or never ran), marked on every surface that shows the run (the console's
board, ``vtc runs`` text/md/csv/json, ``vtc report``), and never an automatic baseline.
"""

from __future__ import annotations

from enum import StrEnum

from tui.domain.results import BenchResult, RunRecord


class LoadMark(StrEnum):
    """How a load that did not finish whole reads on the board."""

    CANCELLED = "cancelled"
    PARTIAL = "partial"


def load_mark(bench: BenchResult | None) -> LoadMark | None:
    """``cancelled`` or ``partial`` for a load that did not finish whole; ``None`` otherwise
    (no load, or every prompt answered)."""
    if bench is None:
        return None
    if bench.cancelled:
        return LoadMark.CANCELLED
    counted = bench.duration_limit_s is None and bench.num_prompts > 0
    if bench.failed > 0 or (counted and bench.completed < bench.num_prompts):
        return LoadMark.PARTIAL
    return None


def mark_text(bench: BenchResult | None) -> str:
    """``load cancelled (12/32 done)``, ``load partial (30/32 done)``, or ``""``."""
    mark = load_mark(bench)
    if mark is None or bench is None:
        return ""
    done = f" ({bench.completed}/{bench.num_prompts} done)" if bench.num_prompts else ""
    return f"load {mark.value}{done}"


def completed_load(run: RunRecord) -> bool:
    """Whether ``run`` carries a load that finished whole (answered requests, no mark)."""
    return run.bench is not None and run.bench.completed > 0 and load_mark(run.bench) is None
