"""A twin profile: what a calibration measured about one real server, and the fit of it.

The simulator's scheduler, KV blocks, chunked prefill, preemption and prefix caching are
vLLM's; what a profile adds is the time one engine step takes on the operator's machine,
in BLIS's form (field report, section 5)::

    step_s = b0 + b1 * uncached_prefill_tokens + b2 * decode_tokens + b3 * context_ktokens

(``context_ktokens``: thousands of KV entries the step's attention reads; BLIS leaves it out,
long prompts on small machines need it) plus a per-request overhead before a request
reaches the scheduler (HTTP, tokenization: ``a0 + a1 * prompt_tokens``, BLIS's alpha
terms). The memory side (KV capacity, block size, the bytes that are not KV) comes from the
server's startup log and ``/metrics``. The identity (model, device, vLLM version, dtype,
quantization, parallelism) says which server it is the twin of: a profile is refused or
marked for any other (:func:`identity_mismatch`).

Pure: no I/O, no clock. The fit here is least squares over linear rows; which rows the
measured loads give (the step mix each load produces) is the simulator's business
(:mod:`tui.sim.twin`), so the fit accounts for batching as the twin will run it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from tui.domain.errors import VtcError
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import BenchResult
from tui.domain.workload import LoadSpec

PROFILE_SCHEMA = 1
"""The profile file's schema version (a file of another version is refused with its number)."""

DeviceKind = Literal["cpu", "gpu"]

#: The coefficients a fit solves for, in the order of a row's features.
COEFFICIENTS = ("b0", "b1", "b2", "b3", "a0", "a1")

#: The metrics a fit and a validation compare, bench serve's keys.
FIT_METRICS = ("output_throughput", "mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms")


class ProfileError(VtcError):
    """A profile that cannot be used: unreadable, another schema, another server."""


class ProfileIdentity(BaseModel):
    """Which server a profile is the twin of (every field from that server's own report)."""

    model_config = ConfigDict(frozen=True)

    model: str  # the model path or id as served (``/v1/models``' root)
    device: str  # "cpu" or the GPU's name as NVML / the log says it
    device_kind: DeviceKind = "gpu"
    vllm_version: str = ""
    dtype: str = "auto"
    quantization: str | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1

    def describe(self) -> str:
        """One line: ``model on device, vLLM x (dtype, tp N)``."""
        quant = f", {self.quantization}" if self.quantization else ""
        par = self.tensor_parallel_size * self.pipeline_parallel_size
        tp = f", tp x pp {par}" if par > 1 else ""
        return f"{self.model} on {self.device}, vLLM {self.vllm_version} ({self.dtype}{quant}{tp})"


def identity_mismatch(profile: ProfileIdentity, server: ProfileIdentity) -> list[str]:
    """What differs between the profile's server and ``server`` (empty: the same one).

    Model, device and vLLM version each make the profile another server's; dtype,
    quantization and parallelism too. Each item reads ``vLLM 0.33.0 (profile: 0.32.0)``.
    """
    out = []
    checks = (
        ("model", profile.model, server.model),
        ("device", profile.device, server.device),
        ("vLLM", profile.vllm_version, server.vllm_version),
        ("dtype", profile.dtype, server.dtype),
        ("quantization", profile.quantization or "none", server.quantization or "none"),
        ("tp", str(profile.tensor_parallel_size), str(server.tensor_parallel_size)),
        ("pp", str(profile.pipeline_parallel_size), str(server.pipeline_parallel_size)),
    )
    for what, ours, theirs in checks:
        if theirs and ours != theirs:
            out.append(f"{what} {theirs} (profile: {ours})")
    return out


class StepCoefficients(BaseModel):
    """The fitted step and request costs, in seconds (see the module docstring)."""

    model_config = ConfigDict(frozen=True)

    b0: float = Field(default=0.0, ge=0, description="seconds per step")
    b1: float = Field(default=0.0, ge=0, description="seconds per uncached prefill token")
    b2: float = Field(default=0.0, ge=0, description="seconds per decode token")
    b3: float = Field(default=0.0, ge=0, description="seconds per thousand context tokens read")
    a0: float = Field(default=0.0, ge=0, description="seconds per request before scheduling")
    a1: float = Field(default=0.0, ge=0, description="seconds per prompt token before scheduling")

    def step_seconds(self, prefill_tokens: int, decode_tokens: int, context_tokens: int) -> float:
        """One engine step's time (0 for an empty step)."""
        if prefill_tokens + decode_tokens <= 0:
            return 0.0
        return (
            self.b0
            + self.b1 * prefill_tokens
            + self.b2 * decode_tokens
            + self.b3 * context_tokens / 1000.0
        )

    def request_seconds(self, prompt_tokens: int) -> float:
        """A request's time from arrival to the scheduler's queue."""
        return self.a0 + self.a1 * prompt_tokens

    def as_vector(self) -> np.ndarray:
        """The coefficients in :data:`COEFFICIENTS` order."""
        return np.array([getattr(self, name) for name in COEFFICIENTS], dtype=float)

    @classmethod
    def from_vector(cls, values: Sequence[float]) -> StepCoefficients:
        """The inverse of :meth:`as_vector` (negatives clipped to 0)."""
        return cls(**{n: max(0.0, float(v)) for n, v in zip(COEFFICIENTS, values, strict=True)})


class MemorySide(BaseModel):
    """What the server's startup log and ``/metrics`` said about memory at calibration."""

    model_config = ConfigDict(frozen=True)

    kv_tokens: int = Field(gt=0, description="KV cache size in tokens (the startup log's)")
    block_size: int = Field(gt=0)
    num_blocks: int = Field(gt=0)
    kv_bytes: int | None = None  # available KV memory (kv_cache_memory_bytes or the log's)
    total_bytes: int | None = None  # device memory (GPU total, or the CPU node's)
    non_kv_bytes: int | None = None  # requested - available KV: weights, activation, graphs
    weights_bytes: int | None = None  # "Model loading took"
    graph_bytes: int | None = None  # CUDA graph capture, when logged
    activation_bytes: int | None = None  # the profile run's peak activation, when logged
    non_torch_bytes: int | None = None  # non-torch memory, when logged
    gpu_memory_utilization: float | None = None
    max_model_len: int = Field(gt=0)
    max_num_seqs: int = Field(gt=0, description="resolved at calibration")
    max_num_batched_tokens: int = Field(gt=0, description="resolved at calibration")


class FitSample(BaseModel):
    """One measured load: the server's flags, the load and what it measured.

    The unit a fit (and a refit after more real trials) consumes: a calibration's designed
    loads, or any real trial of a sweep.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    flags: ServeFlags
    load: LoadSpec
    result: BenchResult
    server_steps: int | None = None  # vllm:iteration_tokens_total's count over the load


class Residual(BaseModel):
    """One metric of one sample: measured, what the twin says, the error in percent."""

    model_config = ConfigDict(frozen=True)

    sample: str
    metric: str
    measured: float
    predicted: float

    @property
    def error_pct(self) -> float:
        """Absolute percentage error (0 when both are 0)."""
        return abs_pct_error(self.predicted, self.measured)


def abs_pct_error(predicted: float, measured: float) -> float:
    """``100 * |predicted - measured| / measured`` (inf when only ``measured`` is 0)."""
    if measured == 0:
        return 0.0 if predicted == 0 else math.inf
    return 100.0 * abs(predicted - measured) / abs(measured)


class MeasuredError(BaseModel):
    """How far the twin is from the real server: median and worst absolute % error."""

    model_config = ConfigDict(frozen=True)

    median_pct: float
    worst_pct: float
    per_metric: dict[str, float] = Field(default_factory=dict)  # metric -> median %
    source: str = "fit"  # "fit" (the calibration loads) or "held-out" (a validation)

    def label(self) -> str:
        """``±7%`` (median absolute error)."""
        return f"±{self.median_pct:.0f}%"


def measured_error(residuals: Sequence[Residual], source: str = "fit") -> MeasuredError:
    """The median and worst absolute % error over ``residuals``, and per metric."""
    errors = [r.error_pct for r in residuals if math.isfinite(r.error_pct)]
    if not errors:
        return MeasuredError(median_pct=math.inf, worst_pct=math.inf, source=source)
    per: dict[str, list[float]] = {}
    for r in residuals:
        if math.isfinite(r.error_pct):
            per.setdefault(r.metric, []).append(r.error_pct)
    return MeasuredError(
        median_pct=float(np.median(errors)),
        worst_pct=float(max(errors)),
        per_metric={k: float(np.median(v)) for k, v in per.items()},
        source=source,
    )


class Profile(BaseModel):
    """A calibrated twin of one server (saved as JSON, :data:`PROFILE_SCHEMA` versioned)."""

    model_config = ConfigDict(frozen=True)

    schema_version: int = PROFILE_SCHEMA
    name: str
    revision: int = 1
    created: str = ""  # ISO UTC time of the fit
    identity: ProfileIdentity
    flags: ServeFlags  # the server's flags at calibration (the twin's base command)
    coefficients: StepCoefficients
    memory: MemorySide
    samples: list[FitSample] = Field(default_factory=list)
    residuals: list[Residual] = Field(default_factory=list)
    error: MeasuredError
    fit_seconds: float = 0.0  # how long the calibration took, loads included
    serial_frontend: bool = False  # requests wait for the intake of those ahead of them

    def label(self) -> str:
        """``predicted (twin NAME r2, ±7%)``: what every predicted number carries."""
        return f"predicted (twin {self.name} r{self.revision}, {self.error.label()})"


# -- the fit ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class FitRow:
    """One linear equation: ``features · coefficients ≈ target`` (seconds), with a weight.

    ``features`` follow :data:`COEFFICIENTS`: step counts, prefill tokens, decode tokens and
    context thousands summed over the steps a measured time spans, then request counts and
    prompt tokens of the overheads it includes.
    """

    features: tuple[float, ...]
    target: float
    weight: float = 1.0
    offset: float = 0.0  # seconds of the target no coefficient explains (taken off first)


def _nnls(a: np.ndarray, y: np.ndarray, ridge: float) -> np.ndarray:
    """Non-negative least squares of ``a x = y`` by an active-set loop (columns scaled)."""
    active = list(range(a.shape[1]))
    coef = np.zeros(a.shape[1])
    for _ in range(a.shape[1] + 1):
        sub = a[:, active]
        lhs = sub.T @ sub + ridge * np.eye(len(active))
        sol = np.linalg.solve(lhs, sub.T @ y) if active else np.zeros(0)
        coef[:] = 0.0
        coef[active] = sol
        negative = [j for j in active if coef[j] < 0]
        if not negative:
            break
        active = [j for j in active if j not in negative]
    return coef


HUBER_K = 1.345  # Huber's constant, in units of the residuals' robust scale
ROBUST_ROUNDS = 12


def fit_coefficients(
    rows: Sequence[FitRow], ridge: float = 1e-9, *, robust: bool = True
) -> StepCoefficients:
    """Non-negative weighted least squares over ``rows`` (numpy), Huber-robust by default.

    A coefficient the data cannot support (negative in the unconstrained solution) is held
    at 0 and the rest refitted, so a twin never has a step that gets faster with more
    work. ``ridge`` keeps a column the loads do not excite (no long contexts, say) at 0.
    ``robust``: iteratively reweighted, so a load a busy machine stalled (a measurement far
    off every other) weighs like a large residual, not a squared one.
    """
    if not rows:
        raise ProfileError("nothing to fit: no measured loads")
    a = np.array([r.features for r in rows], dtype=float)
    y = np.array([r.target - r.offset for r in rows], dtype=float)
    w = np.sqrt(np.array([max(r.weight, 0.0) for r in rows], dtype=float))
    a, y = a * w[:, None], y * w
    scale = np.maximum(np.abs(a).max(axis=0), 1e-12)  # columns of very different sizes
    a = a / scale
    coef = _nnls(a, y, ridge)
    for _ in range(ROBUST_ROUNDS if robust else 0):
        resid = a @ coef - y
        spread = 1.4826 * float(np.median(np.abs(resid - np.median(resid))))
        if spread <= 1e-12:
            break
        limit = HUBER_K * spread
        h = np.sqrt(np.minimum(1.0, limit / np.maximum(np.abs(resid), 1e-12)))
        new = _nnls(a * h[:, None], y * h, ridge)
        if np.allclose(new, coef, rtol=1e-4, atol=1e-12):
            coef = new
            break
        coef = new
    return StepCoefficients.from_vector(coef / scale)


def sample_metrics(result: BenchResult) -> dict[str, float]:
    """The :data:`FIT_METRICS` a result has (missing or non-finite ones left out)."""
    out = {}
    for key in FIT_METRICS:
        value = result.metric(key)
        if value is not None and math.isfinite(value) and value > 0:
            out[key] = value
    return out
