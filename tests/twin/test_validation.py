"""The honest error: families left out in turn, the server's own spread, older profiles."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fakes.profiles import DESIGN, cpu_profile, twin_samples

from tui.domain.prediction import ErrorSource, TwinMetric
from tui.domain.profile import FIT_METRICS, UNFITTED, FitSample, StepCoefficients
from tui.domain.workload import LoadSpec
from tui.sim.twin import model_facts
from tui.store.profiles import list_profiles, load_profile, save_profile
from tui.twin.predict import predict
from tui.twin.validation import calibrate, family, repeat_spread, validate


def _passes(samples: list[FitSample], factor: float) -> list[FitSample]:
    """A second pass of ``samples`` whose every timed figure is ``factor`` times the first's."""
    out = []
    for s in samples:
        r = s.result
        stats = {k: v * factor for k, v in r.stats.items()}
        result = r.model_copy(
            update={"output_throughput": r.output_throughput / factor, "stats": stats}
        )
        out.append(s.model_copy(update={"name": f"{s.name}#2", "result": result}))
    return out


@pytest.fixture
def profile(tmp_path: Path):  # type: ignore[no-untyped-def]
    return cpu_profile(tmp_path / "tiny")


def test_a_family_is_a_load_without_its_pass() -> None:
    assert family("decode-c4#2") == family("decode-c4") == "decode-c4"


def test_a_server_the_twin_can_be_is_validated_out_of_sample(profile) -> None:  # type: ignore[no-untyped-def]
    samples = twin_samples(profile)
    cold = profile.model_copy(update={"coefficients": StepCoefficients(), "fit_error": UNFITTED})
    fitted = calibrate(cold, samples)
    assert fitted.validation is not None
    assert fitted.validation.source is ErrorSource.VALIDATION
    # Every load scored, held out, per metric: the fitted means and the tails alike.
    assert sum(m.count for m in fitted.validation.metrics) == len(fitted.residuals)
    assert fitted.validation.count == sum(r.metric in FIT_METRICS for r in fitted.residuals)
    assert fitted.validation.interval(TwinMetric.P99_TTFT) is not None
    # In sample the fit finds the very coefficients; out of sample a fold without the long
    # prompts (or the shared prefix) must guess that cost: worse, but not far off.
    assert fitted.fit_error.stated_pct < 1.0
    assert fitted.fit_error.stated_pct < fitted.validation.stated_pct < 25.0
    assert fitted.repeat_spread_pct is None  # one pass: no repeats
    assert fitted.label().endswith("validation)")


def test_a_load_unlike_the_others_shows_in_the_validation_not_the_fit(profile) -> None:  # type: ignore[no-untyped-def]
    # A "server" whose long prompts cost twice what the others imply: the fit absorbs it
    # as best it can, the family left out is missed by a fit that never saw it.
    samples = twin_samples(profile)
    odd = _passes(samples[2:3], 2.0)[0].model_copy(update={"name": samples[2].name})
    samples[2] = odd
    cold = profile.model_copy(update={"coefficients": StepCoefficients(), "fit_error": UNFITTED})
    fitted = calibrate(cold, samples)
    assert fitted.validation is not None
    assert fitted.validation.worst_pct > fitted.fit_error.worst_pct
    assert fitted.validation.stated_pct > fitted.fit_error.stated_pct


def test_the_servers_own_spread_is_read_from_its_repeated_loads(profile) -> None:  # type: ignore[no-untyped-def]
    first = twin_samples(profile)
    spread = repeat_spread(first + _passes(first, 1.1))
    # Every timed figure 10% apart: (1.1 - 1) / 1.05 of the mean; throughput likewise.
    assert spread == pytest.approx(100 * 0.1 / 1.05, rel=0.05)
    assert repeat_spread(first) is None


def test_too_few_families_leave_nothing_to_validate(profile) -> None:  # type: ignore[no-untyped-def]
    samples = twin_samples(profile, DESIGN[:2])
    assert validate(profile, samples) is None


def test_a_profile_carries_its_model_and_never_reads_its_files(profile, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    kept = profile.model_copy(update={"model": model_facts(profile.flags.model)})
    shutil.rmtree(tmp_path / "tiny")  # the model's files are gone
    load = LoadSpec(input_len=32, output_len=16, num_prompts=4, max_concurrency=2)
    assert predict(kept, kept.flags, load).starts
    with pytest.raises(Exception, match="tiny"):
        predict(profile, profile.flags, load)  # an older profile without it reads them


def test_an_older_profile_loads_marked_as_never_validated(profile, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    saved = save_profile(profile, data)
    path = data / "profiles" / f"{saved.name}.json"
    old = json.loads(path.read_text())
    old["error"] = old.pop("fit_error")  # the field's name before issue 27
    for key in ("validation", "repeat_spread_pct", "model"):
        old.pop(key)
    old["error"].pop("interval_pct")
    path.write_text(json.dumps(old))
    loaded = load_profile(saved.name, data)
    assert loaded.validation is None and loaded.model is None
    assert loaded.stated.source is ErrorSource.FIT
    assert loaded.label() == "predicted (twin tiny-cpu r1, ±2% fit only)"
    (listed,) = list_profiles(data)
    assert listed.error.startswith("not validated; fit ±2%")
