"""The twin's honest error: each load family scored by a fit that never saw it.

A calibration's loads come in families (``decode-c16``, ``prefill-c4``, ... and, with two
passes, ``decode-c16#2`` the same load with other prompts). :func:`validate` leaves each
family out in turn, fits the rest from scratch, and scores the left-out family on that
fit: the residuals are out of sample, like BLIS's validation split and LLM-Emu's
held-out figures. Their :func:`tui.domain.profile.measured_error` (the 80th percentile
interval, median, worst) is the profile's validation error. :func:`repeat_spread` is the
real server's own spread between the passes of one load: the floor no twin can beat.
:func:`calibrate` is the one calibration fit: the profile on every load, its validation
and the spread.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from tui.domain.prediction import ErrorSource
from tui.domain.profile import (
    FitSample,
    MeasuredError,
    Profile,
    ProfileError,
    Residual,
    StepCoefficients,
    measured_error,
    sample_metrics,
)
from tui.twin.fit import FIT_ROUNDS, fit_best, fit_profile, residuals_of
from tui.twin.numerics import POLISH_EVALS

MIN_TRAIN = 3
"""A fold fitted on fewer loads than this cannot separate the coefficients: skipped."""
FOLD_POLISH = 0
"""Twin runs of the polish per fold: the folds fit by least squares alone (the profile
itself is polished, so its validation is, if anything, pessimistic)."""


def family(name: str) -> str:
    """A sample's load family: its name without the pass suffix (``decode-c4#2``)."""
    return name.split("#", 1)[0]


def families(samples: Sequence[FitSample]) -> list[str]:
    """The families of ``samples``, in order of first appearance."""
    return list(dict.fromkeys(family(s.name) for s in samples))


def validate(
    profile: Profile, samples: Sequence[FitSample], *, polish_evals: int = FOLD_POLISH
) -> MeasuredError | None:
    """Leave-one-family-out error of ``profile``'s fit on ``samples`` (``None``: fewer than
    two families, or no fold could be fitted). Each fold starts from no coefficients and
    keeps the profile's intake model (chosen on every load)."""
    cold = profile.model_copy(update={"coefficients": StepCoefficients()})
    residuals: list[Residual] = []
    for left_out in families(samples):
        train = [s for s in samples if family(s.name) != left_out]
        test = [s for s in samples if family(s.name) == left_out]
        if len(train) < MIN_TRAIN:
            continue
        try:
            fold = fit_profile(cold, train, rounds=FIT_ROUNDS, polish_evals=polish_evals)
        except ProfileError:
            continue
        residuals.extend(residuals_of(fold, test))
    if not residuals:
        return None
    return measured_error(residuals, ErrorSource.VALIDATION)


def repeat_spread(samples: Sequence[FitSample]) -> float | None:
    """The real server's own spread: per family run more than once and per metric,
    ``100 * (max - min) / mean`` over its repeats; the median (``None``: no repeats)."""
    groups: dict[str, list[FitSample]] = {}
    for s in samples:
        groups.setdefault(family(s.name), []).append(s)
    spreads = []
    for group in groups.values():
        if len(group) < 2:
            continue
        per = [sample_metrics(s.result) for s in group]
        for key in set.intersection(*(set(m) for m in per)):
            values = [m[key] for m in per]
            mean = statistics.fmean(values)
            if mean > 0:
                spreads.append(100.0 * (max(values) - min(values)) / mean)
    return statistics.median(spreads) if spreads else None


def calibrate(
    profile: Profile, samples: Sequence[FitSample], *, polish_evals: int = POLISH_EVALS
) -> Profile:
    """``profile`` fitted on every sample (:func:`tui.twin.fit.fit_best`), with its
    validation error and the server's repeat spread."""
    fitted = fit_best(profile, samples, polish_evals=polish_evals)
    return fitted.model_copy(
        update={
            "validation": validate(fitted, samples),
            "repeat_spread_pct": repeat_spread(samples),
        }
    )
