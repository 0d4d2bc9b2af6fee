"""``vtc calibrate``'s procedure against the simulator: measured, fitted, saved, resumed."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fakes.running_sim import Running, start_sim
from fakes.tiny_model import write_tiny_model

from tui.domain.calibration import design
from tui.domain.flags.serve import ServeFlags
from tui.domain.profile import ProfileError, identity_mismatch
from tui.store.profiles import list_profiles, load_profile
from tui.twin.calibrate import Calibration, CalibrationError, journal_path, read_journal
from tui.twin.predict import predict

# slow tier: calibrations: designed loads on a simulator process, then the fit.
pytestmark = pytest.mark.slow

SPEED = "50"


@dataclass
class SimTarget:
    """An in-process simulator as a calibration target."""

    running: Running
    flags: ServeFlags

    @property
    def base_url(self) -> str:
        return self.running.base

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(trust_env=False)

    def log_text(self) -> str:
        return self.running.out.getvalue() + self.running.err.getvalue()


@pytest.fixture
async def sim(tmp_path: Path):  # type: ignore[no-untyped-def]
    model = str(write_tiny_model(tmp_path / "tiny"))
    running = await start_sim(model, "--sim-speed", SPEED, "--max-num-seqs", "32")
    yield SimTarget(running, ServeFlags(model=model, max_num_seqs=32))
    await running.close()


def _calibration(target: SimTarget, data: Path, **kw) -> Calibration:  # type: ignore[no-untyped-def]
    loads = design(4096, scale=0.25)[:5]
    return Calibration(name="sim", target=target, loads=loads, data_dir=data, **kw)


async def test_a_calibration_measures_fits_and_saves_a_profile(
    sim: SimTarget, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    seen = []
    profile = await _calibration(sim, data).run(seen.append)
    assert [p.done for p in seen][-1] == 5 and seen[-1].current == "fitting"
    assert seen[-1].eta_s is not None
    saved = load_profile("sim", data)
    assert saved.revision == 1 and saved == profile
    # The server's own report: the simulator names the GPU it simulates, its KV capacity.
    assert saved.identity.device == "NVIDIA GeForce RTX 3080"
    assert saved.identity.vllm_version
    assert saved.memory.block_size == 16 and saved.memory.kv_tokens > 0
    assert {s.name for s in saved.samples} == {d.name for d in design(4096, 0.25)[:5]}
    assert all(s.server_steps for s in saved.samples[1:])  # the first has warm-ups
    assert all(s.server and s.server.prefill_s is not None for s in saved.samples[1:])
    assert saved.step_check is not None and saved.step_check.loads == 4
    assert saved.coefficients.b0 > 0 and saved.fit_error.median_pct < 100
    # Five families, one pass: each scored by a fit that left it out; no repeats, no spread.
    assert saved.validation is not None and saved.validation.source.value == "validation"
    assert saved.validation.count > 0 and saved.repeat_spread_pct is None
    assert saved.model is not None and saved.model.shape.num_layers > 0
    (listed,) = list_profiles(data)
    assert listed.name == "sim" and listed.usable
    # The twin of that server predicts a run of it, labelled so.
    pred = predict(saved, sim.flags, design(4096, 0.25)[2].load)
    assert pred.starts and pred.output_throughput
    assert pred.label().startswith("predicted (twin sim r1, ±") and "validation" in pred.label()


async def test_an_interrupted_calibration_resumes_without_repeating_a_load(
    sim: SimTarget, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    first = _calibration(sim, data)
    started: list[str] = []

    def stop_at_third(p) -> None:  # type: ignore[no-untyped-def]
        if p.current not in started:
            started.append(p.current)
        if p.done == 2:
            task.cancel()

    task = asyncio.ensure_future(first.run(stop_at_third))
    with pytest.raises(asyncio.CancelledError):
        await task
    done = read_journal(journal_path(data, "sim"), sim.flags)
    assert len(done) == 2
    again: list[str] = []
    await _calibration(sim, data).run(lambda p: again.append(p.current))
    assert not set(done) & set(again)  # the two finished loads were not run again
    assert load_profile("sim", data).samples[0].name in done


async def test_a_budget_too_small_for_enough_loads_says_so(sim: SimTarget, tmp_path: Path) -> None:
    with pytest.raises(CalibrationError, match="too few to fit"):
        await _calibration(sim, tmp_path / "data", budget_s=0.01).run()


def test_a_profile_of_another_server_is_named_as_such(tmp_path: Path) -> None:
    from fakes.profiles import cpu_profile

    p = cpu_profile(tmp_path / "m")
    other = p.identity.model_copy(update={"vllm_version": "0.33.0"})
    assert identity_mismatch(p.identity, other) == ["vLLM 0.33.0 (profile: 0.32.0)"]
    with pytest.raises(ProfileError):
        load_profile("missing", tmp_path)


def test_a_prediction_for_another_server_says_what_differs(tmp_path: Path) -> None:
    from fakes.profiles import cpu_profile

    from tui.domain.results import Reproduction, RunRecord
    from tui.domain.workload import LoadSpec
    from tui.twin.predict import predict as to_prediction

    p = cpu_profile(tmp_path / "m")
    load = LoadSpec(num_prompts=4, max_concurrency=2, input_len=16, output_len=8)
    same = to_prediction(p, p.flags, load)
    assert same.caveat == "" and same.label() == "predicted (twin tiny-cpu r1, ±5% validation)"
    run = RunRecord(flags=p.flags, repro=Reproduction(vllm_version="0.33.0+cpu", gpu_name=None))
    other = to_prediction(p, p.flags, load, run)
    assert other.caveat == "vLLM 0.33.0 (profile: 0.32.0)"
    assert "profile of another server: vLLM 0.33.0" in other.label()
    simulated = Reproduction(vllm_version="0.33.0", gpu_name="NVIDIA L4 (simulated)")
    demo = RunRecord(flags=p.flags, repro=simulated)
    # A simulator speaking another vLLM than the profile's is another release's twin: said
    # so (its simulated device is never compared).
    assert to_prediction(p, p.flags, load, demo).caveat == "vLLM 0.33.0 (profile: 0.32.0)"
    spoken = Reproduction(vllm_version="0.32.0", gpu_name="NVIDIA L4 (simulated)")
    assert to_prediction(p, p.flags, load, RunRecord(flags=p.flags, repro=spoken)).caveat == ""
