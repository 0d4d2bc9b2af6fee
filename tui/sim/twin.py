"""The twin of a real server: a profile's step times and memory on the simulator's scheduler.

Three things, all on the virtual clock, none reading the network or the clock:

- :func:`twin_config` turns a profile and a command line into the scheduler limits the
  real server would run with (vLLM's defaults for the profile's device kind, the KV
  capacity from the profile's memory side) or the startup error it would hit
  (``will it start``), with vLLM's own wording from :mod:`tui.domain.kv`;
- :func:`fit_profile` fits a profile's coefficients to measured loads by serving each load
  on the twin (so the step mix is the batching the twin produces) and solving the least
  squares of :func:`tui.domain.profile.fit_coefficients` on it, again until the
  coefficients settle (a fixed point: the schedule depends on the step times);
- :func:`predict` is what the twin expects of a command line and a load: throughput, TTFT,
  TPOT, ITL, E2EL, KV tokens, labelled with the profile and its measured error.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace

import numpy as np

from tui.domain import budget, kv
from tui.domain.flags.serve import ServeFlags
from tui.domain.profile import (
    FitRow,
    FitSample,
    MeasuredError,
    Profile,
    ProfileError,
    ProfileIdentity,
    Residual,
    StepCoefficients,
    fit_coefficients,
    measured_error,
    sample_metrics,
)
from tui.domain.workload import LoadSpec
from tui.sim.argv import parse_command
from tui.sim.catalog import GIB, UnknownModelError, resolve_model
from tui.sim.costmodel import CostModel, StepWork
from tui.sim.memory import NO_KV_MEMORY, FailureKind, MemoryPlan, ResolvedConfig, StartupFailure
from tui.sim.model_files import model_folder
from tui.sim.scheduler import SchedulerConfig
from tui.sim.twin_load import LoadShape, TracedRequest, TwinTrace, run_twin_load
from tui.sim.twin_polish import POLISH_EVALS, measurer, polish

INITIAL = StepCoefficients(b0=0.005, b1=0.00005, b2=0.0002, b3=0.0, a0=0.002, a1=0.0)
"""Where a fit starts (a small model on a small machine); it moves far in a few rounds."""
FIT_ROUNDS = 8
# How much each measured mean counts. The run's duration (throughput) and end-to-end
# latency are where the tokens ended up; the client's TTFT and TPOT also carry when a busy
# API server let them out (a stalled server streams a burst), so they count less.
METRIC_WEIGHTS = {"mean_ttft_ms": 0.35, "mean_tpot_ms": 0.35, "mean_e2el_ms": 1.0}
FIT_TOLERANCE = 0.005  # relative change of every coefficient that ends the rounds


@dataclass(frozen=True)
class TwinConfig:
    """The scheduler limits a command line gets on the profile's server, or why it fails."""

    config: SchedulerConfig | None
    kv_tokens: int = 0
    failure: str | None = None  # vLLM's message when it would not start
    capacity: kv.KvCapacity | None = None
    available_kv: int = 0  # bytes, as "Available KV cache memory" would log them
    engine: budget.EngineConfig | None = None  # vLLM's defaults on the profile's device

    @property
    def starts(self) -> bool:
        """Whether the server would start."""
        return self.config is not None


def _engine(profile: Profile, flags: ServeFlags) -> budget.EngineConfig:
    folder = model_folder(flags.model)
    try:
        entry = resolve_model(flags.model, folder)
    except UnknownModelError as exc:
        raise ProfileError(str(exc)) from exc
    ident = profile.identity
    total = profile.memory.total_bytes or 80 * GIB
    return budget.resolve_engine(
        flags,
        entry.shape,
        total_bytes=total,
        device_name=ident.device,
        kind=ident.device_kind,
        checkpoint_quantization=entry.checkpoint_quantization,
        embedding_params=entry.embedding_params,
    )


def resolved_batch(
    flags: ServeFlags, identity: ProfileIdentity, total_bytes: int | None
) -> tuple[int, int]:
    """``(max_num_seqs, max_num_batched_tokens)`` vLLM resolves for ``flags`` on that device."""
    shape = resolve_model(flags.model, model_folder(flags.model)).shape
    eng = budget.resolve_engine(
        flags,
        shape,
        total_bytes=total_bytes or 80 * GIB,
        device_name=identity.device,
        kind=identity.device_kind,
    )
    return eng.max_num_seqs, eng.max_num_batched_tokens


def _available_kv(profile: Profile, cfg: budget.EngineConfig) -> int:
    """Bytes for KV: the explicit size, else the calibration's, moved by what flags change."""
    mem = profile.memory
    if cfg.kv_cache_memory_bytes is not None:
        return int(cfg.kv_cache_memory_bytes)
    if profile.identity.device_kind == "cpu" or mem.total_bytes is None:
        # A CPU server's KV is VLLM_CPU_KVCACHE_SPACE or its explicit size: the calibration's.
        return int(mem.kv_bytes or mem.kv_tokens * cfg.kv_bytes_per_token)
    requested = budget.requested_bytes(mem.total_bytes, cfg.gpu_memory_utilization)
    base = _engine(profile, profile.flags)
    non_kv = mem.non_kv_bytes if mem.non_kv_bytes is not None else 0
    # What the flags move besides the KV: the activation peak (max_num_batched_tokens) and
    # CUDA graphs (max_num_seqs, eager), by the domain's estimates, relative to calibration.
    moved = (budget.activation_peak_bytes(cfg) - budget.activation_peak_bytes(base)) + (
        budget.cudagraph_bytes(cfg) - budget.cudagraph_bytes(base)
    )
    return requested - non_kv - moved


def _kv_scale(profile: Profile) -> float:
    """Logged over computed KV capacity at calibration (1 when the domain's bytes per token
    are the server's): a KV dtype or layout the domain sizes differently is corrected."""
    mem = profile.memory
    base = _engine(profile, profile.flags)
    available = base.kv_cache_memory_bytes or mem.kv_bytes
    if not available or mem.kv_tokens <= 0:
        return 1.0
    computed = (available // base.bytes_per_block) * base.block_size
    if computed <= 0:
        return 1.0
    scale = computed / mem.kv_tokens
    return scale if 0.25 <= scale <= 4.0 else 1.0  # far off: a profile of another layout


def twin_config(profile: Profile, flags: ServeFlags) -> TwinConfig:
    """The scheduler limits and KV capacity ``flags`` get on the profile's server."""
    cfg = _engine(profile, flags)
    per_block = max(1, round(cfg.bytes_per_block * _kv_scale(profile)))
    bs = cfg.block_size
    override = cfg.num_gpu_blocks_override
    available = override * per_block if override else _available_kv(profile, cfg)
    if available <= 0:
        return TwinConfig(None, failure=NO_KV_MEMORY, engine=cfg)
    usable = kv.usable_for_check(available, per_block)
    mml = cfg.max_model_len
    if cfg.auto_fit:
        mml = min(cfg.derived_max_model_len, kv.estimate_max_model_len(usable, bs, per_block, mml))
    needed = kv.needed_bytes(mml, bs, per_block)
    if needed > usable:
        estimate = kv.estimate_max_model_len(usable, bs, per_block, mml)
        failure = kv.kv_too_small_message(mml, needed, usable, estimate)
        return TwinConfig(None, failure=failure, available_kv=available, engine=cfg)
    cap = kv.capacity(available, bs, per_block, mml, override)
    blocks = cap.num_blocks
    config = SchedulerConfig(
        num_gpu_blocks=blocks,
        block_size=bs,
        max_num_seqs=cfg.max_num_seqs,
        max_num_batched_tokens=cfg.max_num_batched_tokens,
        max_model_len=mml,
        enable_prefix_caching=cfg.enable_prefix_caching,
        enable_chunked_prefill=cfg.enable_chunked_prefill,
    )
    return TwinConfig(config, cap.kv_cache_size_tokens, None, cap, available, cfg)


def twin_plan(
    profile: Profile, flags: ServeFlags, cfg: ResolvedConfig, plan: MemoryPlan
) -> tuple[ResolvedConfig, MemoryPlan]:
    """A started simulator's configuration and memory plan, made the profile's server's.

    The batch limits and block size are vLLM's defaults for the profile's device kind, the
    KV capacity the profile's memory side, and a command that would not fit fails as the
    real server would (``vtc-sim serve --sim-profile``).
    """
    tc = twin_config(profile, flags)
    eng = tc.engine
    assert eng is not None
    cfg = replace(
        cfg,
        block_size=eng.block_size,
        max_num_seqs=eng.max_num_seqs,
        max_num_batched_tokens=eng.max_num_batched_tokens,
        max_model_len=tc.config.max_model_len if tc.config else eng.max_model_len,
    )
    failure = None
    if tc.failure is not None:
        kind: FailureKind = "kv_too_small" if tc.available_kv > 0 else "no_kv_memory"
        failure = StartupFailure(kind, "ValueError", tc.failure)
    plan = replace(
        plan,
        cfg=cfg,
        capacity=tc.capacity,
        available_kv=tc.available_kv,
        max_model_len=cfg.max_model_len,
        failure=failure,
        auto_fit_message=None,
    )
    return cfg, plan


@dataclass(frozen=True)
class TwinCost(CostModel):
    """The roofline's bookkeeping (MFU counters) with the profile's step time."""

    coefficients: StepCoefficients = field(default_factory=StepCoefficients)

    @classmethod
    def of(cls, base: CostModel, coefficients: StepCoefficients) -> TwinCost:
        """``base`` with its step time replaced by ``coefficients``'."""
        values = {f.name: getattr(base, f.name) for f in fields(CostModel)}
        return cls(**values, coefficients=coefficients)

    def step_time(self, work: StepWork) -> float:
        """The profile's step time (simulated seconds)."""
        return self.coefficients.step_seconds(
            work.prefill_tokens, work.decode_seqs, work.context_tokens
        )


def flags_of(argv: Sequence[str]) -> ServeFlags:
    """``MODEL [vllm serve flags]`` as the twin reads them (``--sim-*`` options left out)."""
    command = parse_command(list(argv))
    values = {k: v for k, v in command.parsed.values.items() if v is not None}
    try:
        return ServeFlags.model_validate({"model": command.parsed.model or "", **values})
    except ValueError as exc:
        raise ProfileError(f"not a command line the twin can read: {exc}") from exc


# -- measuring a trace ------------------------------------------------------------------------
@dataclass(frozen=True)
class TwinRun:
    """What a load on the twin measured, in bench serve's terms (milliseconds, tokens/s)."""

    completed: int
    duration_s: float
    output_throughput: float
    request_throughput: float
    mean_ttft_ms: float
    p90_ttft_ms: float
    p99_ttft_ms: float
    mean_tpot_ms: float
    mean_itl_ms: float
    mean_e2el_ms: float
    p99_e2el_ms: float

    def metric(self, key: str) -> float:
        """A number by bench serve's key."""
        return float(getattr(self, key))


def _pct(values: list[float], p: float) -> float:
    return float(np.percentile(values, p)) if values else 0.0


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else 0.0


def measure(trace: TwinTrace) -> TwinRun:
    """bench serve's numbers for a twin run (requests that finished)."""
    done = trace.finished
    ttft: list[float] = []
    e2e: list[float] = []
    tpot: list[float] = []
    itl: list[float] = []
    out_tokens = 0
    end = 0.0
    for t in done:
        r = t.request
        assert r.first_token is not None and r.finished_at is not None
        ttft.append(1000.0 * (r.first_token - t.dispatched))
        e2e.append(1000.0 * (r.finished_at - t.dispatched))
        n = len(r.output_ids)
        out_tokens += n
        if n > 1:
            tpot.append(1000.0 * (r.finished_at - r.first_token) / (n - 1))
            times = r.token_times
            itl.extend(1000.0 * (b - a) for a, b in itertools.pairwise(times))
        end = max(end, r.finished_at)
    dur = end if end > 0 else 0.0
    return TwinRun(
        completed=len(done),
        duration_s=dur,
        output_throughput=out_tokens / dur if dur else 0.0,
        request_throughput=len(done) / dur if dur else 0.0,
        mean_ttft_ms=_mean(ttft),
        p90_ttft_ms=_pct(ttft, 90),
        p99_ttft_ms=_pct(ttft, 99),
        mean_tpot_ms=_mean(tpot),
        mean_itl_ms=_mean(itl),
        mean_e2el_ms=_mean(e2e),
        p99_e2el_ms=_pct(e2e, 99),
    )


def _rows(trace: TwinTrace, measured: dict[str, float]) -> list[FitRow]:
    """Each measured mean as a linear function of the coefficients (seconds)."""
    done = trace.finished
    if not done or not trace.steps:
        return []
    cum = trace.cumulative()
    steps = np.array(trace.steps, dtype=float)

    def span(t: TracedRequest, last: int | None) -> np.ndarray:
        assert last is not None
        k = t.enter_step
        head = t.enter_fraction * steps[k] if k < len(steps) else np.zeros(4)
        return head + cum[last + 1] - cum[min(k + 1, last + 1)]

    ttft: list[np.ndarray] = []
    e2e: list[np.ndarray] = []
    tpot: list[np.ndarray] = []
    offsets: list[float] = []
    for t in done:
        over = np.array([float(t.frontend_units), float(t.frontend_tokens)])
        offsets.append(t.frontend_offset)
        first = span(t, t.first_step)
        full = span(t, t.last_step)
        ttft.append(np.concatenate([first, over]))
        e2e.append(np.concatenate([full, over]))
        n = len(t.request.output_ids)
        if n > 1:
            tpot.append(np.concatenate([(full - first) / (n - 1), np.zeros(2)]))
    rows = []
    targets = (("mean_ttft_ms", ttft), ("mean_e2el_ms", e2e), ("mean_tpot_ms", tpot))
    offset = float(np.mean(offsets))
    for key, feats in targets:
        if key in measured and feats:
            target = measured[key] / 1000.0
            mean = np.mean(feats, axis=0)
            off = 0.0 if key == "mean_tpot_ms" else offset
            weight = METRIC_WEIGHTS.get(key, 1.0) / target**2
            row = FitRow(tuple(float(x) for x in mean), target, weight, off)
            rows.append(row)
    if "output_throughput" in measured:
        out = sum(len(t.request.output_ids) for t in done)
        duration = out / measured["output_throughput"]
        busy = duration - trace.idle
        if busy > 0:
            total = np.concatenate([cum[-1], np.zeros(2)])
            rows.append(FitRow(tuple(float(x) for x in total), busy, 1.0 / duration**2))
    return rows


def _shape(sample: FitSample) -> LoadShape:
    """The sample's load with the lengths the server actually saw (measured means)."""
    res = sample.result
    n = max(res.completed, 1)
    if not res.completed:
        return LoadShape.of(sample.load)
    input_len = round(res.total_input_tokens / n) - sample.load.prefix_len
    return LoadShape.of(sample.load, input_len, round(res.total_output_tokens / n))


def replay(profile: Profile, sample: FitSample) -> TwinRun | None:
    """The twin's run of a measured sample (``None``: that command would not start)."""
    tc = twin_config(profile, sample.flags)
    if tc.config is None:
        return None
    trace = run_twin_load(
        tc.config, profile.coefficients, _shape(sample), serial_frontend=profile.serial_frontend
    )
    return measure(trace)


def residuals_of(profile: Profile, samples: Sequence[FitSample]) -> list[Residual]:
    """Measured against the twin, metric by metric, for every sample."""
    out = []
    for sample in samples:
        run = replay(profile, sample)
        if run is None:
            continue
        for key, value in sample_metrics(sample.result).items():
            out.append(
                Residual(sample=sample.name, metric=key, measured=value, predicted=run.metric(key))
            )
    return out


def fit_profile(
    profile: Profile,
    samples: Sequence[FitSample],
    *,
    rounds: int = FIT_ROUNDS,
    polish_evals: int = POLISH_EVALS,
) -> Profile:
    """``profile`` with coefficients fitted to ``samples``, their residuals and error.

    Each round serves every sample on the twin with the current coefficients, writes each
    measured mean (TTFT, TPOT, E2EL, and the duration behind the throughput) as a linear
    function of the coefficients over the steps it spans, and solves the non-negative
    least squares of all of them in relative terms. The samples may come from different
    command lines (a sweep's real trials): each is served with its own flags. Then
    :func:`tui.sim.twin_polish.polish` moves the coefficients to where the twin's own
    numbers match the measured ones best (``polish_evals`` twin runs of every sample; 0:
    the least squares alone, for a quick refit).
    """
    if not samples:
        raise ProfileError("nothing to fit: no measured loads")
    coef = profile.coefficients if profile.coefficients.as_vector().any() else INITIAL
    configs = {s.name: twin_config(profile, s.flags) for s in samples}
    usable = [s for s in samples if configs[s.name].config is not None]
    if not usable:
        raise ProfileError("none of the measured command lines would start on this profile")
    for _ in range(rounds):
        rows: list[FitRow] = []
        for s in usable:
            config = configs[s.name].config
            assert config is not None
            serial = profile.serial_frontend
            trace = run_twin_load(config, coef, _shape(s), serial_frontend=serial)
            rows.extend(_rows(trace, sample_metrics(s.result)))
        new = fit_coefficients(rows)
        old_v, new_v = coef.as_vector(), new.as_vector()
        settled = np.all(np.abs(new_v - old_v) <= FIT_TOLERANCE * np.maximum(np.abs(old_v), 1e-7))
        coef = new
        if settled:
            break
    if polish_evals > 0:
        cases = [(configs[s.name].config, _shape(s), s) for s in usable]
        points = measurer(cases, profile.serial_frontend, METRIC_WEIGHTS)  # type: ignore[arg-type]
        coef = polish(coef, points, polish_evals)
    fitted = profile.model_copy(update={"coefficients": coef, "samples": list(samples)})
    res = residuals_of(fitted, usable)
    return fitted.model_copy(update={"residuals": res, "error": measured_error(res, "fit")})


def fit_best(
    profile: Profile, samples: Sequence[FitSample], *, polish_evals: int = POLISH_EVALS
) -> Profile:
    """:func:`fit_profile` with the API server's intake side by side and serial: both by
    least squares, the one whose fit error (median, then worst) on ``samples`` is lower
    then polished (the twin's structure is chosen on the calibration loads alone, never on
    held-out ones)."""
    variants = [profile.model_copy(update={"serial_frontend": s}) for s in (False, True)]
    fits = [fit_profile(v, samples, polish_evals=0) for v in variants]
    best = min(fits, key=lambda p: (p.error.median_pct, p.error.worst_pct))
    return fit_profile(best, samples, rounds=0, polish_evals=polish_evals)


# -- predictions ------------------------------------------------------------------------------
@dataclass(frozen=True)
class TwinPrediction:
    """What the twin of a server expects of a command line and a load.

    ``label`` is what every shown number carries (``predicted (twin NAME r1, ±7%)``).
    """

    starts: bool
    kv_tokens: int
    run: TwinRun | None
    failure: str | None
    label: str
    error: MeasuredError
    profile: str


def predict(profile: Profile, flags: ServeFlags, load: LoadSpec) -> TwinPrediction:
    """The twin's run of ``load`` on ``flags`` (``starts`` False with vLLM's reason)."""
    tc = twin_config(profile, flags)
    run = None
    if tc.config is not None:
        shape = LoadShape.of(load)
        trace = run_twin_load(
            tc.config, profile.coefficients, shape, serial_frontend=profile.serial_frontend
        )
        run = measure(trace)
    return TwinPrediction(
        starts=tc.starts,
        kv_tokens=tc.kv_tokens,
        run=run,
        failure=tc.failure,
        label=profile.label(),
        error=profile.error,
        profile=profile.name,
    )
