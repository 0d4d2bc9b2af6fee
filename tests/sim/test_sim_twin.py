"""The twin: a profile's step times on the simulator's scheduler, fitted and predicting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.profiles import KNOWN, cpu_profile, twin_samples

from tui.domain.profile import PROFILE_SCHEMA, ProfileError, StepCoefficients
from tui.domain.workload import LoadSpec
from tui.sim.cli import run as sim_run
from tui.sim.twin import twin_config
from tui.sim.whatif import ScenarioError, Workload, run_argv
from tui.store.profiles import list_profiles, load_profile, save_profile
from tui.twin.fit import fit_profile
from tui.twin.predict import predict


@pytest.fixture
def profile(tmp_path: Path):  # type: ignore[no-untyped-def]
    return cpu_profile(tmp_path / "tiny")


def test_a_fit_started_elsewhere_finds_the_server_it_measured(profile) -> None:  # type: ignore[no-untyped-def]
    samples = twin_samples(profile)
    start = profile.model_copy(update={"coefficients": StepCoefficients()})
    fitted = fit_profile(start, samples)
    got = fitted.coefficients
    for name in ("b0", "a0"):
        assert getattr(got, name) == pytest.approx(getattr(KNOWN, name), rel=0.1)
    # The prefill's tokens and its attention pairs, a decode's token, sequence and stream:
    # each group is what these loads tell apart (tests/twin/test_fit.py: the terms alone).
    assert got.b1 == pytest.approx(KNOWN.b1, rel=0.15)
    assert got.b2 + got.b5 + got.a2 == pytest.approx(KNOWN.b2 + KNOWN.b5 + KNOWN.a2, rel=0.05)
    assert fitted.fit_error.median_pct < 1.0
    assert {r.sample for r in fitted.residuals} == {s.name for s in samples}


def test_more_batch_means_more_throughput_and_longer_steps(profile) -> None:  # type: ignore[no-untyped-def]
    one = predict(
        profile,
        profile.flags,
        LoadSpec(input_len=32, output_len=64, num_prompts=16, max_concurrency=1),
    )
    eight = predict(
        profile,
        profile.flags,
        LoadSpec(input_len=32, output_len=64, num_prompts=16, max_concurrency=8),
    )
    assert one.starts and eight.starts
    assert eight.metric("output_throughput") > one.metric("output_throughput")
    assert eight.metric("mean_tpot_ms") > one.metric("mean_tpot_ms")


def test_kv_capacity_and_will_it_start_follow_the_flags(profile) -> None:  # type: ignore[no-untyped-def]
    base = twin_config(profile, profile.flags)
    assert base.starts and base.kv_tokens == profile.memory.kv_tokens
    small = profile.flags.model_copy(update={"kv_cache_memory_bytes": 2**20})
    refused = predict(profile, small, LoadSpec())
    assert not refused.starts and refused.output_throughput is None
    assert refused.failure is not None and "estimated maximum model length" in refused.failure
    assert refused.label() == "predicted (twin tiny-cpu r1, ±5% validation)"


def test_profiles_are_saved_as_revisions_and_listed(profile, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    assert save_profile(profile, data).revision == 1
    assert save_profile(profile, data).revision == 2
    names = sorted(p.name for p in (data / "profiles").iterdir())
    assert names == ["tiny-cpu.json", "tiny-cpu.r1.json"]
    (listed,) = list_profiles(data)
    assert (listed.name, listed.revision, listed.usable) == ("tiny-cpu", 2, True)
    assert load_profile("tiny-cpu", data).revision == 2


def test_a_profile_of_another_schema_or_name_is_refused_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "old.json"
    bad.write_text(json.dumps({"schema_version": PROFILE_SCHEMA + 1}))
    with pytest.raises(ProfileError, match="schema"):
        load_profile(str(bad))
    with pytest.raises(ProfileError, match="no profile named 'nope'"):
        load_profile("nope", tmp_path)
    with pytest.raises(ProfileError, match="bad profile name"):
        load_profile("two words", tmp_path)


def test_the_simulator_runs_a_profile(profile, tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("VTC_DATA_DIR", str(tmp_path / "data"))
    save_profile(profile)
    model = profile.flags.model
    out = run_argv(
        [model, "--kv-cache-memory-bytes", "64M", "--sim-profile", "tiny-cpu"],
        Workload(num_requests=8, input_len=32, output_len=16),
    )
    assert out.config.block_size == 128  # vLLM's CPU default, not the GPU's 16
    assert len(out.requests) == 8
    with pytest.raises(ScenarioError, match="max seq len"):
        run_argv(
            [model, "--kv-cache-memory-bytes", "1M", "--sim-profile", "tiny-cpu"],
            Workload(num_requests=1),
        )
    assert sim_run(["gpus"]) == 0
    listing = capsys.readouterr().out
    assert "hand-made" in listing
    assert "tiny-cpu r1" in listing and "on cpu, vLLM 0.32.0" in listing


async def test_the_whatif_lane_runs_a_profile_with_a_concurrency_cap(  # type: ignore[no-untyped-def]
    profile, tmp_path: Path
) -> None:
    from tui.domain.results import SweepTag
    from tui.tune.whatif_lane import WhatIfLane

    saved = save_profile(profile, tmp_path / "data")
    path = tmp_path / "data" / "profiles" / f"{saved.name}.json"
    lane = WhatIfLane(["--sim-profile", str(path)])
    started = await lane.start(profile.flags, SweepTag(sweep_id="s", trial=1))
    assert started.ok and started.kv_tokens == profile.memory.kv_tokens
    load = LoadSpec(input_len=32, output_len=64, num_prompts=16, max_concurrency=4)
    run = await lane.bench(load, model=None, goodput={})
    twin = predict(profile, profile.flags, load)
    assert twin.starts
    assert run.result.completed == 16 and run.result.max_concurrency == 4
    assert run.result.output_throughput == pytest.approx(twin.metric("output_throughput"), rel=1e-6)
