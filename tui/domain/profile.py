"""A twin profile: what a calibration measured about one real server, and the fit of it.

The simulator's scheduler, KV blocks, chunked prefill, preemption and prefix caching are
vLLM's; what a profile adds is the time one engine step takes on the operator's machine,
in the form of BLIS's trained-physics basis and Vidur's operator split
(``twin-step-models.md``, "Step-time forms")::

    step_s = b0                              per step (launch, scheduling)
           + b1 * prefill_tokens             linear layers over the prompt tokens computed
           + b2 * decode_tokens              linear layers over one token per decode sequence
           + b3 * decode_kv_ktokens          decode attention: the KV each decode sequence reads
           + b4 * prefill_pairs_M            prefill attention: (query, key) pairs, the
                                             scheduler's ``attention_pairs`` less decode's
           + b5 * sequences                  per scheduled sequence (BLIS's batch_size,
                                             Vidur's prepare-inputs and sampler terms)
           [+ a0 * requests_taken_in + a1 * their_prompt_tokens + a2 * tokens_streamed]

The bracket is the output path and the API server's intake when they block the engine:
on a CPU server the API server (HTTP, tokenization, streaming) competes with the engine's
threads for the same cores, so its work lengthens the step it runs beside. On a GPU it
does not (BLIS's non-blocking alphas): a request waits ``a0 + a1 * prompt_tokens`` before
the scheduler sees it (both kinds) and each streamed token ``a2`` after its step.

The memory side (KV capacity, block size, the bytes that are not KV) comes from the
server's startup log and ``/metrics``. The identity (model, device, vLLM version, dtype,
quantization, parallelism) says which server it is the twin of: a profile is refused or
marked for any other (:func:`identity_mismatch`).

A profile states two errors, each a typed record per metric (:class:`MetricInterval`):
the fit error (the loads it was fitted on, in-sample) and the validation error (each
load family scored by a fit that never saw it, the same procedure that made the profile,
:mod:`tui.twin.validation`); a prediction carries the validation's interval per metric.
It also carries the model's shape and the device, so a prediction never reads the
model's files.

Pure: no I/O, no clock. The fit itself is :mod:`tui.twin.fit`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from tui.domain.errors import VtcError
from tui.domain.flags.serve import ServeFlags
from tui.domain.kv import ModelShape
from tui.domain.prediction import (
    ErrorSource,
    MetricInterval,
    TwinMetric,
    covering,
    twin_label,
)
from tui.domain.results import BenchResult
from tui.domain.workload import LoadSpec

PROFILE_SCHEMA = 1
"""The profile file's schema version (a file of another version is refused with its number)."""

DeviceKind = Literal["cpu", "gpu"]

#: The coefficients a fit solves for, in the order of a row's features.
COEFFICIENTS = ("b0", "b1", "b2", "b3", "b4", "b5", "a0", "a1", "a2")
STEP_TERMS = 6  # b0..b5: the engine's own; a0..a2: the API server's intake and output path

#: The metrics a fit writes rows for (client means, bench serve's keys).
FIT_METRICS = (
    TwinMetric.OUTPUT_THROUGHPUT,
    TwinMetric.MEAN_TTFT,
    TwinMetric.MEAN_TPOT,
    TwinMetric.MEAN_E2EL,
)
#: The metrics a validation scores: the fitted ones and the tails it does not fit (their
#: held-out error is measured all the same, so a p99 states an interval or "not validated").
SCORED_METRICS = (*FIT_METRICS, TwinMetric.P99_TTFT, TwinMetric.P99_ITL, TwinMetric.P99_E2EL)


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
        ("vLLM", profile.vllm_version.split("+")[0], server.vllm_version.split("+")[0]),
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
    b1: float = Field(default=0.0, ge=0, description="seconds per prefill token computed")
    b2: float = Field(default=0.0, ge=0, description="seconds per decode token")
    b3: float = Field(default=0.0, ge=0, description="seconds per 1k KV tokens decode reads")
    b4: float = Field(default=0.0, ge=0, description="seconds per 1M prefill attention pairs")
    b5: float = Field(default=0.0, ge=0, description="seconds per scheduled sequence")
    a0: float = Field(default=0.0, ge=0, description="seconds per request before scheduling")
    a1: float = Field(default=0.0, ge=0, description="seconds per prompt token before scheduling")
    a2: float = Field(default=0.0, ge=0, description="seconds per output token streamed")

    def seconds(self, features: Sequence[float]) -> float:
        """Coefficients times ``features`` (:data:`COEFFICIENTS` order): a step's or a
        request's time."""
        return float(np.dot(self.as_vector(), np.asarray(features, dtype=float)))

    def step_seconds(
        self,
        prefill_tokens: int,
        decode_tokens: int,
        decode_context_tokens: int,
        prefill_pairs: int = 0,
        sequences: int = 0,
    ) -> float:
        """One engine step's own time, without the API server's (0 for an empty step)."""
        if prefill_tokens + decode_tokens <= 0:
            return 0.0
        return (
            self.b0
            + self.b1 * prefill_tokens
            + self.b2 * decode_tokens
            + self.b3 * decode_context_tokens / 1e3
            + self.b4 * prefill_pairs / 1e6
            + self.b5 * sequences
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


class ServerSide(BaseModel):
    """What the server's own ``/metrics`` counted over one load (``None``: not exposed).

    Steps from ``vllm:iteration_tokens_total``'s count; per-request means (seconds) from
    the ``vllm:request_{queue,prefill,decode}_time_seconds`` histograms' sums and counts:
    the engine's own clock, without the HTTP client's or the API server's share.
    """

    model_config = ConfigDict(frozen=True)

    steps: int | None = None
    requests: int = 0  # the histograms' count over the load
    queue_s: float | None = None
    prefill_s: float | None = None
    decode_s: float | None = None


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
    server: ServerSide | None = None  # the server's own /metrics over the load


class Residual(BaseModel):
    """One metric of one sample: measured, what the twin says, the error in percent."""

    model_config = ConfigDict(frozen=True)

    sample: str
    metric: TwinMetric
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

    ``interval_pct`` is the stated error over every metric: the
    interval covering :data:`INTERVAL_PERCENTILE` % of new outcomes (``None`` in files
    written before it existed: the median stands in); ``metrics`` the same per metric,
    typed (:meth:`interval`). ``source`` says whether the residuals were the fit's own
    loads or held out.
    """

    # An unfitted or unmeasurable error is infinite: saved as "Infinity", not as null.
    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")

    median_pct: float
    worst_pct: float
    interval_pct: float | None = None
    metrics: tuple[MetricInterval, ...] = ()
    source: ErrorSource = ErrorSource.FIT
    count: int = 0  # residuals it summarizes

    @model_validator(mode="before")
    @classmethod
    def _older_file(cls, data: object) -> object:
        """A file of before :class:`MetricInterval`: its two dicts, read into records."""
        if not isinstance(data, dict) or "metrics" in data:
            return data
        medians, intervals = data.get("per_metric") or {}, data.get("interval_per_metric") or {}
        known = {m.value for m in TwinMetric}
        records = [
            {"metric": k, "interval_pct": intervals.get(k, v), "median_pct": v, "worst_pct": v}
            for k, v in medians.items()
            if k in known
        ]
        rest = {k: v for k, v in data.items() if k not in ("per_metric", "interval_per_metric")}
        return {**rest, "metrics": records}

    @field_validator("source", mode="before")
    @classmethod
    def _older_source(cls, value: object) -> ErrorSource:
        return ErrorSource.read(value)

    @property
    def stated_pct(self) -> float:
        """The interval over every metric (the median for an older file)."""
        return self.interval_pct if self.interval_pct is not None else self.median_pct

    def of(self, metric: TwinMetric) -> MetricInterval | None:
        """``metric``'s record (``None``: no residual of it)."""
        return next((m for m in self.metrics if m.metric is metric), None)

    def interval(self, metric: TwinMetric) -> float | None:
        """The interval ``metric`` states (``None``: not measured for it)."""
        found = self.of(metric)
        return found.interval_pct if found is not None else None

    def stated_for(self, metric: TwinMetric) -> float:
        """The interval for one metric (else over all metrics)."""
        own = self.interval(metric)
        return own if own is not None else self.stated_pct

    def label(self) -> str:
        """``±12%`` (the stated interval)."""
        return f"±{self.stated_pct:.0f}%"

    def per_metric_line(self) -> str:
        """``tok/s ±8% (median 3%, worst 11%), TTFT ±22% ...``: each metric's record."""
        return ", ".join(
            f"{m.metric.short} ±{m.interval_pct:.1f}% (median {m.median_pct:.1f}%, "
            f"worst {m.worst_pct:.1f}%)"
            for m in self.metrics
        )

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
    """Median, interval (:func:`~tui.domain.prediction.covering`: what covers
    :data:`INTERVAL_PERCENTILE` % of new outcomes) and worst absolute % error over
    ``residuals``, also per metric (:class:`MetricInterval`). The overall figures are the
    fitted metrics' (the tails, scored but never fitted, have their own records)."""
    fitted = set(FIT_METRICS)
    errors = [r.error_pct for r in residuals if math.isfinite(r.error_pct) and r.metric in fitted]
    if not errors:
        return MeasuredError(median_pct=math.inf, worst_pct=math.inf, source=source)
    per: dict[TwinMetric, list[float]] = {}
    for r in residuals:
        if math.isfinite(r.error_pct):
            per.setdefault(r.metric, []).append(r.error_pct)
    records = tuple(
        MetricInterval(
            metric=m,
            interval_pct=covering(v),
            median_pct=float(np.median(v)),
            worst_pct=float(max(v)),
            count=len(v),
        )
        for m in SCORED_METRICS
        if (v := per.get(m))
    )
    return MeasuredError(
        median_pct=float(np.median(errors)),
        worst_pct=float(max(errors)),
        interval_pct=covering(errors),
        metrics=records,
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


class StepCheck(BaseModel):
    """The twin's engine steps against the server's own (``vllm:iteration_tokens_total``)
    per load, checked before any timing is fitted: a large mismatch is the scheduler's
    error (another batching than vLLM's), not a step cost a fit should absorb."""

    model_config = ConfigDict(frozen=True)

    loads: int  # loads with a server count
    median_pct: float  # median absolute % difference of step counts
    worst_pct: float
    worst_load: str = ""

    def line(self) -> str:
        """``step counts: twin vs server median 2.1%, worst 7.9% (decode-c32)``."""
        return (
            f"step counts: twin vs server over {self.loads} loads, median "
            f"{self.median_pct:.1f}%, worst {self.worst_pct:.1f}% ({self.worst_load})"
        )


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
    # The API server's work lengthens the engine's steps (a CPU server: same cores).
    frontend_blocks: bool = False
    # The engine steps each load took on the twin against the server's own count.
    step_check: StepCheck | None = None

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


def sample_metrics(
    result: BenchResult, metrics: Sequence[TwinMetric] = FIT_METRICS
) -> dict[TwinMetric, float]:
    """The ``metrics`` a result has (missing or non-finite ones left out)."""
    out = {}
    for key in metrics:
        value = result.metric(key.value)
        if value is not None and math.isfinite(value) and value > 0:
            out[key] = value
    return out
