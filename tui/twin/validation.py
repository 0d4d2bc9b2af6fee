"""The twin's honest error: each load family scored by a fit that never saw it.

A calibration's loads come in families (``decode-c16``, ``prefill-c4``, ... and, with two
passes, ``decode-c16#2`` the same load with other prompts). :func:`validate` leaves each
family out in turn, fits the rest from scratch with the very recipe that made the profile
(:class:`~tui.twin.fit.FitRecipe`: nothing is chosen on the left-out loads), and scores
the left-out family on that fit: the residuals are out of sample, like BLIS's validation
split and LLM-Emu's held-out figures. Their :func:`tui.domain.profile.measured_error`
(per metric, the tails included: the 80th percentile interval, median, worst) is the
profile's validation error. :func:`repeat_spread` is the real server's own spread
between the passes of one load: the floor no twin can beat. :func:`calibrate` is the one
fit that ships: the profile on every load, scored by its own validation, the spread and
the step-count check; a sweep's refit goes through it too, so a refit states its own
validation or none.
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
from tui.twin.fit import DEFAULT_RECIPE, FitRecipe, fit_profile, residuals_of, step_check

MIN_TRAIN = 3
"""A fold fitted on fewer loads than this cannot separate the coefficients: skipped."""


def family(name: str) -> str:
    """A sample's load family: its name without the pass suffix (``decode-c4#2``)."""
    return name.split("#", 1)[0]


def families(samples: Sequence[FitSample]) -> list[str]:
    """The families of ``samples``, in order of first appearance."""
    return list(dict.fromkeys(family(s.name) for s in samples))


def validate(
    profile: Profile,
    samples: Sequence[FitSample],
    recipe: FitRecipe = DEFAULT_RECIPE,
    left_out_families: Sequence[str] | None = None,
) -> MeasuredError | None:
    """Leave-one-family-out error of ``recipe``'s fit on ``samples`` (``None``: fewer than
    two families, or no fold could be fitted). Each fold starts from no coefficients.
    ``left_out_families``: the families scored (default: every one)."""
    cold = profile.model_copy(update={"coefficients": StepCoefficients()})
    residuals: list[Residual] = []
    scored = families(samples) if left_out_families is None else list(left_out_families)
    for left_out in scored:
        train = [s for s in samples if family(s.name) != left_out]
        test = [s for s in samples if family(s.name) == left_out]
        if len(train) < MIN_TRAIN:
            continue
        try:
            fold = fit_profile(cold, train, recipe)
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


def refit(
    profile: Profile,
    samples: Sequence[FitSample],
    scored: Sequence[str],
    recipe: FitRecipe = DEFAULT_RECIPE,
) -> Profile:
    """A refit that scores itself: fitted on every sample, validated by leaving each of
    the ``scored`` families out in turn (a sweep's recent trials); with none to score, its
    validation is ``None`` and every label says so (never the calibration's, which was of
    other coefficients)."""
    fitted = fit_profile(profile, samples, recipe)
    validation = validate(fitted, samples, recipe, scored) if scored else None
    return fitted.model_copy(update={"validation": validation})


def calibrate(
    profile: Profile, samples: Sequence[FitSample], recipe: FitRecipe = DEFAULT_RECIPE
) -> Profile:
    """``profile`` fitted on every sample by ``recipe``
    (:func:`tui.twin.fit.fit_profile`), with the validation of that same recipe (``None``:
    too few families), the server's repeat spread and the step-count check."""
    fitted = fit_profile(profile, samples, recipe)
    return fitted.model_copy(
        update={
            "validation": validate(fitted, samples, recipe),
            "repeat_spread_pct": repeat_spread(samples),
            "step_check": step_check(fitted, samples),
        }
    )
