"""A twin on a calibrated profile: a lane on the twin's virtual clock, the profile in memory.

The profile (``tui.domain.profile``: the step model fitted to one real server, its memory
side, its validation error per metric) runs on the simulator's scheduler through the same
code as the console's predictions: :func:`tui.sim.twin.twin_config` says whether a
command line starts (vLLM's reason when not) and :func:`tui.twin.fit.traced` serves the
load (:class:`ProfileLane`). Every real trial of the sweep is one more sample, and
:meth:`ProfileTwin.refit` fits the profile again over the calibration's samples and the
trials' and scores the refit on its recent trials (:func:`tui.twin.validation.refit`).
Revisions are held in memory; the operator's saved profile is not changed by a sweep.

Without a calibration, :func:`cold_profile` starts from the simulator's generic step costs
on the sweep's own base command; the strategy then calibrates on its first real start
(:func:`tui.domain.calibration.design_around`, run on that server before the trial's
own benchmark) so the
first refit has loads that tell the step costs apart.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Mapping, Sequence

from tui.domain.calibration import design_around
from tui.domain.flags.serve import ServeFlags
from tui.domain.prediction import ErrorSource, TwinMetric
from tui.domain.profile import (
    UNFITTED,
    DeviceKind,
    FitSample,
    MemorySide,
    Profile,
    ProfileError,
    ProfileIdentity,
    identity_mismatch,
)
from tui.domain.results import BenchResult, SweepTag
from tui.domain.workload import LoadSpec
from tui.server.diagnose import diagnose
from tui.sim.scheduler import SchedulerConfig, SimulationResult
from tui.sim.twin import model_facts, twin_config
from tui.sim.twin_load import LoadShape
from tui.sim.whatif import Outcome
from tui.tune.lanes import BenchRun, Lane, LaneError, StartResult
from tui.tune.twin import TwinObservation
from tui.tune.whatif_lane import Cache, run_result
from tui.twin.fit import INITIAL, traced
from tui.twin.validation import refit

SCORED_TRIALS = 4
"""A refit scores itself on the sweep's most recent real trials, each left out in turn."""


def cold_profile(flags: ServeFlags, name: str = "sweep-cold") -> Profile:
    """An unfitted profile of the server ``flags`` start (the simulator's generic costs)."""
    kv_bytes = flags.kv_cache_memory_bytes
    device_kind: DeviceKind = "cpu" if kv_bytes is not None else "gpu"
    max_len = flags.max_model_len or 4096
    memory = MemorySide(
        kv_tokens=max(max_len, 1),
        block_size=flags.block_size or 128,
        num_blocks=1,
        kv_bytes=kv_bytes,
        max_model_len=max_len,
        max_num_seqs=flags.max_num_seqs or 256,
        max_num_batched_tokens=flags.max_num_batched_tokens or 2048,
    )
    try:
        model = model_facts(flags.model)  # once, here: the sweep's predictions never read it
    except ProfileError:
        model = None  # not a model the simulator can size: each prediction says so
    return Profile(
        name=name,
        identity=ProfileIdentity(model=flags.model, device=device_kind, device_kind=device_kind),
        flags=flags,
        coefficients=INITIAL,
        memory=memory,
        fit_error=UNFITTED,
        model=model,
        frontend_blocks=device_kind == "cpu",
    )


def sample_of(obs: TwinObservation, name: str) -> FitSample:
    """A real measurement as a fit sample (bench serve's numbers the fit reads)."""
    m = obs.metrics
    done = int(m.get("completed", obs.load.num_prompts))
    result = BenchResult(
        completed=done,
        total_input_tokens=(obs.load.input_len + obs.load.prefix_len) * done,
        total_output_tokens=obs.load.output_len * done,
        output_throughput=m.get("output_throughput", 0.0),
        request_throughput=m.get("request_throughput", 0.0),
        duration=m.get("duration", 0.0),
        stats={k: v for k, v in m.items() if k.endswith("_ms")},
    )
    return FitSample(name=name, flags=obs.flags, load=obs.load, result=result)


class ProfileLane:
    """Trials on the twin of a profile held in memory (the console's very predictions)."""

    def __init__(self, profile: Profile, cache: Cache) -> None:
        self._profile = profile
        self._cache = cache
        self._config: SchedulerConfig | None = None

    @property
    def name(self) -> str:
        """The twin lane's name."""
        return "twin"

    async def start(self, flags: ServeFlags, tag: SweepTag) -> StartResult:
        """Whether ``flags`` start on the profile's server, and its KV capacity."""
        tc = await asyncio.to_thread(twin_config, self._profile, flags)
        self._config = tc.config
        if tc.config is None:
            # The console's diagnosis of vLLM's own message, as a real start would get.
            found = diagnose(tc.failure or "would not start", flags=flags)
            return StartResult(ok=False, diagnosis=found.summary, diagnosis_kind=found.kind)
        return StartResult(ok=True, kv_tokens=tc.kv_tokens)

    async def bench(
        self, load: LoadSpec, *, model: str | None, goodput: Mapping[str, float]
    ) -> BenchRun:
        """``load`` on the twin's virtual clock; bench serve's numbers."""
        if self._config is None:
            raise LaneError("no server is up")
        p = self._profile
        key = ("profile-bench", p.ref, self._config, load, tuple(sorted(goodput.items())))
        found = self._cache.get(key)
        if found is None:
            found = await asyncio.to_thread(self._serve, self._config, load, dict(goodput))
            self._cache[key] = found
        assert isinstance(found, BenchRun)
        return found

    def _serve(
        self, config: SchedulerConfig, load: LoadSpec, goodput: dict[str, float]
    ) -> BenchRun:
        p = self._profile
        trace = traced(config, p.coefficients, LoadShape.of(load), p.frontend_blocks)
        sim = SimulationResult(
            duration=trace.end,
            requests=[t.request for t in trace.requests],
            steps=len(trace.steps),
            num_preemptions=trace.num_preemptions,
            prefix_queries=trace.prefix_queries,
            prefix_hits=trace.prefix_hits,
        )
        outcome = Outcome(sim, config)
        result = run_result(outcome, load.request_rate, goodput, load.max_concurrency)
        return BenchRun(result, 100.0 * outcome.prefix_hit_rate)

    async def reset_prefix_cache(self) -> bool:
        """Every twin benchmark starts with an empty cache."""
        return True

    async def abort(self) -> None:
        """Nothing to cut short."""

    async def release(self) -> None:
        """Nothing held between trials."""


class ProfileTwin:
    """The what-if lane on a profile, fitted again with every real trial."""

    def __init__(
        self, profile: Profile, *, objective_key: str = "output_throughput", model: str = ""
    ) -> None:
        # A profile of another model is marked in every label (issue 20, item 6).
        ident = profile.identity
        other = identity_mismatch(ident, ident.model_copy(update={"model": model or ident.model}))
        self._caveat = "; ".join(other)
        self._base = profile
        self._profile = profile
        self._key = objective_key
        self.cache: Cache = {}
        self.refits = 0

    @property
    def profile(self) -> Profile:
        """The profile as it stands."""
        return self._profile

    @property
    def cold(self) -> bool:
        """Whether it was never fitted (the strategy calibrates on its first start)."""
        return self._profile.fit_error.source is ErrorSource.UNFITTED

    @property
    def fitted(self) -> bool:
        """Whether it was fitted (by a calibration or the sweep's trials)."""
        return not self.cold

    @property
    def label(self) -> str:
        """``predicted (twin NAME rR, ±E% validation)``, or that it is not fitted yet."""
        return self._profile.label(self._caveat)

    @property
    def stated_error(self) -> float | None:
        """The stated interval for the objective's metric (else over all), a fraction: the
        calibration's validation error, else (a cold twin fitted on the sweep's own
        trials) the fit's, which the stop rule tops with its out-of-sample misses."""
        if self.cold:
            return None
        stated = self._profile.stated
        known = {m.value: m for m in TwinMetric}
        own = stated.interval(known[self._key]) if self._key in known else None
        pct = own if own is not None else stated.stated_pct
        return pct / 100.0 if math.isfinite(pct) else None

    def lane(self) -> Lane:
        """A lane on the current revision (held in memory)."""
        return ProfileLane(self._profile, self.cache)

    def calibration_loads(self, load: LoadSpec) -> list[LoadSpec]:
        """:func:`tui.domain.calibration.design_around` while never fitted, else none."""
        return [d.load for d in design_around(load)] if self.cold else []

    async def refit(self, observations: Sequence[TwinObservation]) -> None:
        """Fit the profile again over its own samples and every real observation."""
        own = list(self._base.samples)
        trials = [sample_of(o, f"trial-{i}") for i, o in enumerate(observations)]
        scored = [t.name for t in trials[-SCORED_TRIALS:]]
        # The same recipe as a calibration's; the refit states the validation of its own
        # coefficients (its recent trials, each left out in turn), never the calibration's.
        try:
            fitted = await asyncio.to_thread(
                functools.partial(refit, scored=scored), self._profile, own + trials
            )
        except ProfileError:
            return  # nothing it could serve: the twin stays as it was
        self.refits += 1
        revision = self._base.revision + self.refits
        self._profile = fitted.model_copy(update={"revision": revision})
