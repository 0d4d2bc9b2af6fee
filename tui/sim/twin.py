"""A profile on the simulator: the scheduler limits, KV capacity and step time it gives.

The simulator's side of the twin (``vtc-sim serve --sim-profile`` runs on it; the fit,
the validation and the predictions are :mod:`tui.twin`'s, one room above):
:func:`twin_config` turns a profile and a command line into the scheduler limits the real
server would run with (vLLM's defaults for the profile's device kind, the KV capacity from
the profile's memory side) or the startup error it would hit (``will it start``), with
vLLM's own wording from :mod:`tui.domain.kv`; :class:`TwinCost` is the profile's step time
as a cost model. The model's shape is the one the profile captured at calibration
(:func:`model_facts`): nothing here reads the model's files for a profile that has it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace

from tui.domain import budget, kv
from tui.domain.flags.serve import ServeFlags
from tui.domain.profile import ModelFacts, Profile, ProfileError, ProfileIdentity, StepCoefficients
from tui.sim.argv import parse_command
from tui.sim.catalog import GIB, UnknownModelError, resolve_model
from tui.sim.costmodel import CostModel, StepWork
from tui.sim.memory import NO_KV_MEMORY, FailureKind, MemoryPlan, ResolvedConfig, StartupFailure
from tui.sim.model_files import model_folder
from tui.sim.scheduler import SchedulerConfig


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


def model_facts(model: str) -> ModelFacts:
    """The model's shape as the simulator resolves it (its files, the hub cache or the
    catalogue): read once, at calibration, and kept in the profile."""
    try:
        entry = resolve_model(model, model_folder(model))
    except UnknownModelError as exc:
        raise ProfileError(str(exc)) from exc
    return ModelFacts(
        shape=entry.shape,
        checkpoint_quantization=entry.checkpoint_quantization,
        embedding_params=entry.embedding_params,
    )


def _facts(profile: Profile, model: str) -> ModelFacts:
    """The profile's captured model (an older profile without one: read as before)."""
    return profile.model if profile.model is not None else model_facts(model)


def _engine(profile: Profile, flags: ServeFlags) -> budget.EngineConfig:
    facts = _facts(profile, flags.model)
    ident = profile.identity
    total = profile.memory.total_bytes or 80 * GIB
    return budget.resolve_engine(
        flags,
        facts.shape,
        total_bytes=total,
        device_name=ident.device,
        kind=ident.device_kind,
        checkpoint_quantization=facts.checkpoint_quantization,
        embedding_params=facts.embedding_params,
    )


def resolved_batch(
    flags: ServeFlags, identity: ProfileIdentity, total_bytes: int | None, facts: ModelFacts
) -> tuple[int, int]:
    """``(max_num_seqs, max_num_batched_tokens)`` vLLM resolves for ``flags`` on that device."""
    eng = budget.resolve_engine(
        flags,
        facts.shape,
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
    # The twin's profile holds no LoRA adapters: a LoRA run is not what it was fitted on.
    config = SchedulerConfig.of(cfg, num_gpu_blocks=blocks, max_model_len=mml)
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


def step_features(
    work: StepWork, intake_units: int = 0, intake_tokens: int = 0, blocking: bool = False
) -> tuple[float, ...]:
    """One step's features, in :data:`~tui.domain.profile.COEFFICIENTS` order: what its
    time is the profile's coefficients times (``tui.domain.profile``'s step model).

    ``intake_*``: requests (and their prompt tokens) the API server took in while the
    step ran; with ``blocking`` (a CPU server) they and the tokens streamed lengthen it.
    An empty step is all zeros: no time.
    """
    if work.prefill_tokens + work.decode_seqs <= 0:
        return (0.0,) * 9
    prefill_pairs = max(0, work.attention_pairs - work.decode_context_tokens)
    front = (
        (float(intake_units), float(intake_tokens), float(work.sampled_seqs))
        if blocking
        else (0.0, 0.0, 0.0)
    )
    return (
        1.0,
        float(work.prefill_tokens),
        float(work.decode_seqs),
        work.decode_context_tokens / 1e3,
        prefill_pairs / 1e6,
        float(work.num_seqs),
        *front,
    )


@dataclass
class Intake:
    """Requests the API server took in since the last step (charged to the next one)."""

    units: int = 0
    tokens: int = 0

    def add(self, prompt_tokens: int) -> None:
        """One more request of ``prompt_tokens``."""
        self.units += 1
        self.tokens += prompt_tokens

    def take(self) -> tuple[int, int]:
        """``(requests, prompt tokens)`` so far; the count starts again."""
        out = (self.units, self.tokens)
        self.units = self.tokens = 0
        return out


@dataclass(frozen=True)
class TwinCost(CostModel):
    """The roofline's bookkeeping (MFU counters) with the profile's step time: the same
    features the twin's virtual clock charges (:func:`step_features`), the API server's
    intake included (``vtc-sim serve --sim-profile`` calls :meth:`admit_delay` per
    request, as :func:`tui.sim.twin_load.run_twin_load` does)."""

    coefficients: StepCoefficients = field(default_factory=StepCoefficients)
    blocking: bool = False
    intake: Intake = field(default_factory=Intake, compare=False)

    @classmethod
    def of(cls, base: CostModel, profile: Profile) -> TwinCost:
        """``base`` with its step time replaced by ``profile``'s."""
        values = {f.name: getattr(base, f.name) for f in fields(CostModel)}
        return cls(**values, coefficients=profile.coefficients, blocking=profile.frontend_blocks)

    def admit_delay(self, prompt_tokens: int) -> float:
        """A request's own wait before the scheduler; its work joins the next step's."""
        self.intake.add(prompt_tokens)
        return self.coefficients.request_seconds(prompt_tokens)

    def step_time(self, work: StepWork) -> float:
        """The profile's step time (simulated seconds)."""
        units, tokens = self.intake.take()
        return self.coefficients.seconds(step_features(work, units, tokens, self.blocking))


def flags_of(argv: Sequence[str]) -> ServeFlags:
    """``MODEL [vllm serve flags]`` as the twin reads them (``--sim-*`` options left out)."""
    command = parse_command(list(argv))
    values = {k: v for k, v in command.parsed.values.items() if v is not None}
    try:
        return ServeFlags.model_validate({"model": command.parsed.model or "", **values})
    except ValueError as exc:
        raise ProfileError(f"not a command line the twin can read: {exc}") from exc
