"""The twin against the real CPU build of vLLM 0.32 on the compute-bound reference (issue 27).

One server start: the small Llama (``model_small``: ~51M parameters, compute-bound, so its
timings repeat, unlike the tiny one's), eager, a 64 MiB KV cache. In order:

1. The server's own repeat spread: one load five times, a cold prefix cache each time
   (``benchmarks/_reference.py``). Its floor (the median deviation of a run from the
   runs' mean) sets the bound: ``max(MIN_BOUND, NOISE_MARGIN x floor)``, at most
   ``MAX_BOUND``.
2. A short calibration (six designed loads at a quarter of their size, the top
   concurrency 32, a 150 s budget; the fit's recipe is the calibration's, no polish).
3. Two held-out loads the calibration never ran (new lengths and concurrency; a Poisson
   rate), predicted before they run, then run once each.

Asserted: the median over those loads of ``|ln(twin / real)|`` for output throughput and
mean E2EL is within ``ln(1 + bound)``. Shown in the same run that the bound separates what
it must: the reference's noise passes it (each repeat against the repeats' mean: what a
twin predicting the mean exactly would score), and a broken fit fails it (the calibrated
profile with its step costs x3, and /3, predicting the same held-out loads: 3x off).
``benchmarks/sim_fidelity.py`` measures the accuracy goal itself (10 %) on a quiet
machine; this bound is what CI can hold on a shared one. One start of the small model and
about twenty short loads (the small model is compute-bound: on a loaded machine it slows
many-fold), sized to finish within about six minutes in CI (ten before 2026-11-29). Run it
under the shared lock:
``flock /tmp/vtc-realvllm.lock pytest -q -m realvllm tests/integration/test_realvllm_twin.py``.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from benchmarks._reference import SPREAD_RUNS, RepeatSpread, measure_spread
from tui.domain.calibration import design
from tui.domain.flags.serve import ServeFlags
from tui.domain.profile import Profile
from tui.domain.workload import LoadSpec
from tui.modes.calibrate import launched
from tui.server.provision import ProvisionedVllm
from tui.store.profiles import load_profile
from tui.twin.calibrate import Calibration, reset_prefix_cache
from tui.twin.fidelity import CaseResult, HeldOut, held_out, real_side, twin_side

# timed: the twin's error against the server's own spread, alone (tests/suite_tiers.py)
pytestmark = [pytest.mark.realvllm, pytest.mark.timed]

BOUNDED = ("output_throughput", "mean_e2el_ms")
MIN_BOUND = 0.35  # 35 %: the goal is 10 % on a quiet machine; CI's machine is shared
MAX_BOUND = 0.60  # a fit 2x or 3x off always fails, however noisy the machine
NOISE_MARGIN = 3.0  # the bound stays this far above the reference's own floor
BROKEN = (3.0, 1 / 3)  # step costs scaled: a fit this far off must fail the bound
# 24 output tokens: each repeat ~17 s on a quiet machine (48 took 34 s, and five repeats
# were a third of the test's ten minutes in CI).
SPREAD_LOAD = LoadSpec(
    input_len=128, output_len=24, num_prompts=16, max_concurrency=8, seed=5, ignore_eos=True
)


def with_step_costs(profile: Profile, factor: float) -> Profile:
    """``profile`` with every step cost (b0-b5) x ``factor``: a broken fit (the one place
    this test reads the profile's coefficients)."""
    c = profile.coefficients
    step = ("b0", "b1", "b2", "b3", "b4", "b5")
    scaled = c.model_copy(update={k: getattr(c, k) * factor for k in step})
    return profile.model_copy(update={"coefficients": scaled})


def log_errors(results: list[CaseResult]) -> list[float]:
    """``|ln(twin / real)|`` per held-out load and bounded metric."""
    errors = []
    for r in results:
        for key in BOUNDED:
            real = r.real_value(key)
            assert r.twin is not None and real, f"{r.case.name}: {r.twin_failure or r.real}"
            errors.append(abs(math.log(r.twin.metric(key) / real)))
    return errors


def noise_errors(spread: RepeatSpread) -> list[float]:
    """``|ln(mean / run)|`` per repeat and bounded metric: a perfect twin's error."""
    errors = []
    for key in BOUNDED:
        values = spread.values[key]
        assert len(values) == SPREAD_RUNS, spread.report()
        mean = statistics.fmean(values)
        errors += [abs(math.log(mean / v)) for v in values]
    return errors


def bound_of(spread: RepeatSpread) -> float:
    """The bound on the median log error, from the reference's own floor."""
    floor = max(spread.floor_pct(k) for k in BOUNDED) / 100.0
    return math.log1p(min(MAX_BOUND, max(MIN_BOUND, NOISE_MARGIN * floor)))


def held_out_loads() -> list[HeldOut]:
    """Two held-out loads on the calibrated command line, at half their size."""
    cases = [c for c in held_out(quick=True) if not c.overrides][:2]
    half = [
        HeldOut(
            c.name, c.overrides, c.load.model_copy(update={"num_prompts": c.load.num_prompts // 2})
        )
        for c in cases
    ]
    assert len(half) == 2
    return half


async def test_a_calibrated_twin_predicts_held_out_loads_within_the_references_noise(
    real_vllm: ProvisionedVllm, reference: Path, tmp_path: Path
) -> None:
    flags = ServeFlags(
        model=str(reference),
        enforce_eager=True,
        kv_cache_memory_bytes=64 * 2**20,
        max_model_len=4096,
    )
    async with launched(str(real_vllm.vllm), flags, tmp_path, startup_timeout_s=600) as target:

        async def reset() -> bool:
            return await reset_prefix_cache(target.base_url, target.client)

        spread = await measure_spread(target.base_url, flags.model, reset, SPREAD_LOAD)
        loads = design(4096, scale=0.25, max_num_seqs=32)[:6]
        run = Calibration(name="ci", target=target, loads=loads, data_dir=tmp_path, budget_s=150)
        profile = await run.run()
        assert load_profile("ci", tmp_path).revision == 1
        assert profile.identity.device == "cpu" and profile.identity.vllm_version.startswith("0.32")
        results = []
        for case in held_out_loads():
            r = CaseResult(case)
            twin_side(profile, profile.flags, case, r)  # predicted before the real run
            # One real run each: the bound already stands on the reference's repeat spread
            # above, and a second run of each (~60 s apiece in CI) bought no check.
            await real_side(target.base_url, flags.model, case, r, target.client, repeats=1)
            results.append(r)
    bound = bound_of(spread)
    seen = f"bound {math.expm1(bound):.0%}; {spread.report()}"
    noise = statistics.median(noise_errors(spread))
    assert noise < bound, f"the reference is noise on this machine: {noise:.3f}; {seen}"
    twin = log_errors(results)
    assert len(twin) == 2 * len(results)
    off = [f"{math.expm1(e):.0%}" for e in twin]
    assert statistics.median(twin) < bound, f"the twin is off by {off}; {seen}"
    for factor in BROKEN:
        broken = with_step_costs(profile, factor)
        judged = []
        for r in results:
            again = CaseResult(r.case, real=r.real)
            twin_side(broken, broken.flags, r.case, again)
            judged.append(again)
        assert statistics.median(log_errors(judged)) > bound, f"step costs x{factor:.2f} pass"
