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

A profile states two errors, each a typed field: the fit error (the loads it was fitted
on, in-sample) and the validation error (each load family scored by a fit that never saw
it, :mod:`tui.twin.validation`); what a prediction carries is the validation error's
interval (:data:`tui.domain.prediction.INTERVAL_PERCENTILE`). It also carries the model's
shape and the device, so a prediction never reads the model's files.

Pure: no I/O, no clock. The fit itself is :mod:`tui.twin.fit`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from tui.domain.errors import VtcError
from tui.domain.flags.serve import ServeFlags
from tui.domain.kv import ModelShape
from tui.domain.prediction import INTERVAL_PERCENTILE, ErrorSource, twin_label
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
    """How far the twin is from the real server, over a set of residuals.

    ``interval_pct`` is the stated error: the :data:`INTERVAL_PERCENTILE` th percentile of
    the absolute % errors (``None`` in files written before it existed: the median stands
    in). ``source`` says whether the residuals were the fit's own loads or held out.
    """

    # An unfitted or unmeasurable error is infinite: saved as "Infinity", not as null.
    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")

    median_pct: float
    worst_pct: float
    interval_pct: float | None = None
    per_metric: dict[str, float] = Field(default_factory=dict)  # metric -> median %
    interval_per_metric: dict[str, float] = Field(default_factory=dict)  # metric -> interval %
    source: ErrorSource = ErrorSource.FIT
    count: int = 0  # residuals it summarizes

    @field_validator("source", mode="before")
    @classmethod
    def _older_source(cls, value: object) -> ErrorSource:
        return ErrorSource.read(value)

    @property
    def stated_pct(self) -> float:
        """The interval a prediction states (the median for an older file)."""
        return self.interval_pct if self.interval_pct is not None else self.median_pct

    def stated_for(self, metric: str) -> float:
        """The interval for one metric (else over all metrics)."""
        return self.interval_per_metric.get(metric, self.stated_pct)

    def label(self) -> str:
        """``±12%`` (the stated interval)."""
        return f"±{self.stated_pct:.0f}%"

    def summary(self) -> str:
        """``validation ±12% (median 5%, worst 31%)``: one line for lists and reports."""
        if self.source is ErrorSource.UNFITTED:
            return "not fitted"
        return (
            f"{self.source.value} {self.label()} (median {self.median_pct:.0f}%, "
            f"worst {self.worst_pct:.0f}%)"
        )


UNFITTED = MeasuredError(median_pct=math.inf, worst_pct=math.inf, source=ErrorSource.UNFITTED)
"""A cold profile's error: none measured yet (its source says so; never shown as a figure)."""


def measured_error(
    residuals: Sequence[Residual], source: ErrorSource = ErrorSource.FIT
) -> MeasuredError:
    """Median, :data:`INTERVAL_PERCENTILE` th percentile and worst absolute % error over
    ``residuals``, also per metric."""
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
        interval_pct=float(np.percentile(errors, INTERVAL_PERCENTILE)),
        per_metric={k: float(np.median(v)) for k, v in per.items()},
        interval_per_metric={
            k: float(np.percentile(v, INTERVAL_PERCENTILE)) for k, v in per.items()
        },
        source=source,
        count=len(errors),
    )


class ModelFacts(BaseModel):
    """The model as calibration resolved it: its shape and what the shape does not say.

    A prediction sizes weights and KV from these, never from the model's files or the hub
    cache (the files may be gone, or another model's under the same name by then).
    """

    model_config = ConfigDict(frozen=True)

    shape: ModelShape
    checkpoint_quantization: str | None = None
    embedding_params: float | None = None


class Profile(BaseModel):
    """A calibrated twin of one server (saved as JSON, :data:`PROFILE_SCHEMA` versioned).

    Files written before validation existed have ``error`` (the fit's) and no
    ``validation``: they load, and say they were never validated.
    """

    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")

    schema_version: int = PROFILE_SCHEMA
    name: str
    revision: int = 1
    created: str = ""  # ISO UTC time of the fit
    identity: ProfileIdentity
    flags: ServeFlags  # the server's flags at calibration (the twin's base command)
    coefficients: StepCoefficients
    memory: MemorySide
    samples: list[FitSample] = Field(default_factory=list)
    residuals: list[Residual] = Field(default_factory=list)  # the fit's, on its own loads
    fit_error: MeasuredError = Field(validation_alias=AliasChoices("fit_error", "error"))
    validation: MeasuredError | None = None  # each load family scored by a fit without it
    repeat_spread_pct: float | None = None  # the real server's own, between repeated loads
    model: ModelFacts | None = None  # None: an older file (the model's files are read)
    fit_seconds: float = 0.0  # how long the calibration took, loads included
    serial_frontend: bool = False  # requests wait for the intake of those ahead of them

    @property
    def stated(self) -> MeasuredError:
        """The error a prediction states: the validation's, else the fit's (marked so)."""
        return self.validation if self.validation is not None else self.fit_error

    @property
    def ref(self) -> str:
        """``NAME r2``."""
        return f"{self.name} r{self.revision}"

    def errors_line(self) -> str:
        """``validation ±12% (median 5%, worst 31%)``, or the fit's marked not validated:
        what the profile lists, ``vtc-sim gpus`` and the simulator's log show."""
        if self.validation is not None:
            return self.validation.summary()
        return f"not validated; {self.fit_error.summary()}"

    def label(self, caveat: str = "") -> str:
        """:func:`tui.domain.prediction.twin_label` of this profile's stated error."""
        stated = self.stated
        name = self.name if stated.source is ErrorSource.UNFITTED else self.ref
        return twin_label(name, stated.stated_pct, stated.source, caveat)


def sample_metrics(result: BenchResult) -> dict[str, float]:
    """The :data:`FIT_METRICS` a result has (missing or non-finite ones left out)."""
    out = {}
    for key in FIT_METRICS:
        value = result.metric(key)
        if value is not None and math.isfinite(value) and value > 0:
            out[key] = value
    return out
