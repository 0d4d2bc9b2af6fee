"""A sweep's best against the board's baseline: the line a sweep closes with (issue 39).

``best 1252.4 tok/s, 7.0% below the baseline #3``: a sweep that ends without beating the
run the operator already had says so, in the sweep's own objective and unit. A change inside
the board's noise band (:meth:`tui.domain.board.noise.Groups.band`) reads ``within noise of
the baseline #3 (+0.8%)``, never as a gain.
"""

from __future__ import annotations

from tui.domain.board.baseline import run_label
from tui.domain.board.noise import percent_change
from tui.domain.results import RunRecord
from tui.domain.sweep.outcome import SweepStatus
from tui.domain.sweep.slo import OBJECTIVE_KEYS, OBJECTIVE_UNITS


def versus_baseline(status: SweepStatus, baseline: RunRecord | None, band_pct: float) -> str | None:
    """The best trial against ``baseline``'s load in the sweep's objective; ``None`` without
    a best, a baseline with a load, or an objective the baseline did not measure."""
    best = status.best
    if best is None or best.objective is None or baseline is None or baseline.bench is None:
        return None
    reference = baseline.bench.metric(OBJECTIVE_KEYS.get(status.objective, status.objective))
    change = percent_change(best.objective, reference) if reference else None
    if change is None:
        return None
    unit = OBJECTIVE_UNITS.get(status.objective, "")
    label = run_label(baseline)
    if abs(change) <= band_pct:
        where = f"within noise of the baseline {label} ({change:+.1f}%)"
    else:
        where = f"{abs(change):.1f}% {'above' if change > 0 else 'below'} the baseline {label}"
    return f"best {best.objective:.1f} {unit}, {where}"
