"""Advice from the live samples: what to change, as a flag and a value the form can take.

Pure rules over a window of recent /metrics samples, the GPU reading and the flags the
server runs with. Each rule fires only while its condition holds in the samples it is
given (the caller passes a sliding window, so advice appears and disappears with the
traffic) and names one flag and one value, in a ``Fix`` the form applies like a diagnosis
fix. The rules follow vllmstat's advisor (``core/advisor.py``: KV exhaustion with
preemptions, context over-provisioned below half of max-model-len, GPU memory
under-committed) and vLLM's tuning guide on preemption (more KV memory, fewer sequences).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from tui.domain.diagnosis import Fix
from tui.domain.flags.serve import ServeFlags
from tui.domain.telemetry import GpuSample, ServerMetrics, SourceStatus

KV_SATURATED = 0.95  # KV usage at/above this with requests waiting: the batch is KV-bound
KV_PRESSURE = 0.80  # peak KV usage at/above this: more KV memory would be used
HOLD_SAMPLES = 3  # a condition on the newest samples must hold in this many in a row
LOW_HIT_RATE = 0.05  # prefix-cache hits below this fraction of queried tokens
MIN_QUERIED_TOKENS = 2000  # ... over at least this many tokens (enough to judge)
CONTEXT_OVERPROVISIONED = 0.5  # largest request below this fraction of max_model_len
MIN_GPU_FREE = 0.10  # free GPU memory fraction worth giving to the KV cache
GPU_SAFETY_MARGIN = 0.05  # left free when raising gpu_memory_utilization
MAX_GPU_MEMORY_UTILIZATION = 0.95
SEQS_AFTER_PREEMPTION = 0.75  # max_num_seqs suggested: this share of the peak batch
MIN_MAX_MODEL_LEN = 256

Severity = Literal["warn", "info"]


@dataclass(frozen=True)
class Advice:
    """One piece of advice: a stable ``code``, a one-line ``message`` with the numbers, and
    the ``fix`` (flags to set) when there is one to try."""

    code: str
    severity: Severity
    message: str
    fix: Fix | None = None

    @property
    def reason(self) -> str:
        """Why, in a few words (``preempting``): what a narrow panel shows beside the fix."""
        return REASONS.get(self.code, self.code.replace("_", " "))


REASONS: dict[str, str] = {
    "kv_saturated": "KV cache full",
    "preemptions": "preempting",
    "prefix_cache_low": "few prefix hits",
    "max_model_len_headroom": "context unused",
    "gpu_memory_headroom": "GPU memory free",
}
"""Each rule's reason in a few words (its ``message`` says it with the numbers)."""


@dataclass(frozen=True)
class AdviceInputs:
    """What the rules look at.

    ``metrics``: the recent OK /metrics samples, oldest first (e.g. the last 60 s).
    ``flags``: what the server runs with (``None`` for a server of unknown flags).
    ``max_model_len``: the server's real one (from /v1/models), when known; else the flags'.
    ``gpu`` and ``server_gpus``: the latest GPU reading and the server's GPU indices.
    """

    metrics: Sequence[ServerMetrics]
    flags: ServeFlags | None = None
    gpu: GpuSample | None = None
    server_gpus: Collection[int] = ()
    max_model_len: int | None = None


def _ok(samples: Sequence[ServerMetrics]) -> list[ServerMetrics]:
    return [s for s in samples if s.status is SourceStatus.OK]


def _holds(samples: Sequence[ServerMetrics], test: Callable[[ServerMetrics], bool]) -> bool:
    newest = samples[-HOLD_SAMPLES:]
    return len(newest) >= min(HOLD_SAMPLES, 2) and all(test(s) for s in newest)


def _span(samples: Sequence[ServerMetrics]) -> float:
    return samples[-1].t - samples[0].t if len(samples) > 1 else 0.0


def _growth(
    samples: Sequence[ServerMetrics], read: Callable[[ServerMetrics], float | None]
) -> float:
    """How much a counter grew over the samples, restarts (drops) skipped."""
    total = 0.0
    previous: float | None = None
    for sample in samples:
        value = read(sample)
        if value is None:
            continue
        if previous is not None and value >= previous:
            total += value - previous
        previous = value
    return total


def _gpu_free_fraction(inputs: AdviceInputs) -> float | None:
    """The least free memory fraction among the server's GPUs (``None``: unknown)."""
    gpu = inputs.gpu
    if gpu is None or gpu.status is not SourceStatus.OK:
        return None
    devices = [d for d in gpu.devices if not inputs.server_gpus or d.index in inputs.server_gpus]
    fractions = [
        1.0 - d.memory_used / d.memory_total
        for d in devices
        if d.memory_used is not None and d.memory_total
    ]
    return min(fractions) if fractions else None


def _gpu_memory_utilization(inputs: AdviceInputs) -> float | None:
    for sample in reversed(inputs.metrics):
        if sample.gpu_memory_utilization is not None:
            return sample.gpu_memory_utilization
    if inputs.flags is not None:
        value = inputs.flags.effective("gpu_memory_utilization")
        return float(value) if value is not None else None
    return None


def _more_gpu_memory(inputs: AdviceInputs, min_free: float) -> Fix | None:
    """Raise gpu_memory_utilization into the free memory, if enough is free."""
    free = _gpu_free_fraction(inputs)
    current = _gpu_memory_utilization(inputs)
    if free is None or current is None or free < min_free:
        return None
    target = min(
        MAX_GPU_MEMORY_UTILIZATION, math.floor((current + free - GPU_SAFETY_MARGIN) * 100) / 100
    )
    if target <= current + 0.005:
        return None
    return Fix(
        title=f"raise gpu_memory_utilization {current:.2f} -> {target:.2f}: "
        f"{free:.0%} of the GPU is free",
        set={"gpu_memory_utilization": target},
    )


def _kv_saturated(inputs: AdviceInputs, samples: list[ServerMetrics]) -> Advice | None:
    def saturated(s: ServerMetrics) -> bool:
        return (s.kv_cache_usage or 0.0) >= KV_SATURATED and (s.num_waiting or 0.0) >= 1

    if not _holds(samples, saturated):
        return None
    last = samples[-1]
    message = (
        f"KV cache {last.kv_cache_usage or 0:.0%} full with {last.num_waiting or 0:.0f} "
        "requests waiting: the batch is limited by KV memory"
    )
    fix = _more_gpu_memory(inputs, GPU_SAFETY_MARGIN)
    dtype = inputs.flags.kv_cache_dtype if inputs.flags is not None else None
    if fix is None and inputs.flags is not None and dtype in (None, "auto"):
        fix = Fix(
            title="kv_cache_dtype fp8: half the KV memory per token, twice the tokens",
            set={"kv_cache_dtype": "fp8"},
        )
    if fix is None:
        message += " (no flag left on this GPU: add GPUs with tensor_parallel_size)"
    return Advice("kv_saturated", "warn", message, fix)


def _preemptions(inputs: AdviceInputs, samples: list[ServerMetrics]) -> Advice | None:
    count = _growth(samples, lambda s: s.preemptions_total)
    if count <= 0:
        return None
    peak = max((s.num_running or 0.0) for s in samples)
    message = (
        f"{count:.0f} preemptions in the last {_span(samples):.0f} s: running requests are "
        "evicted and recomputed when the batch outgrows the KV cache"
    )
    target = math.floor(peak * SEQS_AFTER_PREEMPTION)
    if target < 1 or peak < 2:
        return Advice("preemptions", "warn", message)
    fix = Fix(
        title=f"max_num_seqs {target}: a batch the KV cache holds (peak was {peak:.0f})",
        set={"max_num_seqs": target},
    )
    return Advice("preemptions", "warn", message, fix)


def _prefix_cache_low(inputs: AdviceInputs, samples: list[ServerMetrics]) -> Advice | None:
    caching = samples[-1].prefix_caching
    if caching is None and inputs.flags is not None:
        caching = inputs.flags.enable_prefix_caching is not False  # vLLM's default is on
    if not caching:
        return None
    queries = _growth(samples, lambda s: s.extra.get("prefix_cache_queries_total"))
    hits = _growth(samples, lambda s: s.extra.get("prefix_cache_hits_total"))
    if queries < MIN_QUERIED_TOKENS or hits / queries >= LOW_HIT_RATE:
        return None
    message = (
        f"prefix caching is on but {hits / queries:.1%} of {queries:,.0f} prompt tokens hit "
        f"in the last {_span(samples):.0f} s: this traffic shares no prefixes"
    )
    fix = Fix(
        title="enable_prefix_caching off: no hashing of blocks nobody reuses",
        set={"enable_prefix_caching": False},
    )
    return Advice("prefix_cache_low", "info", message, fix)


def _max_model_len(inputs: AdviceInputs) -> int | None:
    if inputs.max_model_len is not None:
        return inputs.max_model_len
    if inputs.flags is not None and inputs.flags.max_model_len and inputs.flags.max_model_len > 0:
        return inputs.flags.max_model_len
    return None


def _context_headroom(inputs: AdviceInputs, samples: list[ServerMetrics]) -> Advice | None:
    limit = _max_model_len(inputs)
    largest = samples[-1].largest_request_tokens
    if limit is None or largest is None or not math.isfinite(largest) or largest <= 0:
        return None
    if largest >= CONTEXT_OVERPROVISIONED * limit:
        return None
    target = max(MIN_MAX_MODEL_LEN, 2 ** math.ceil(math.log2(largest)))
    if target >= limit:
        return None
    message = (
        f"the largest request so far is at most {largest:,.0f} tokens, "
        f"{largest / limit:.0%} of max_model_len {limit:,}"
    )
    fix = Fix(
        title=f"max_model_len {target}: still fits every request seen; a smaller KV cache "
        "(or GPU) can start",
        set={"max_model_len": target},
    )
    return Advice("max_model_len_headroom", "info", message, fix)


def _gpu_headroom(inputs: AdviceInputs, samples: list[ServerMetrics]) -> Advice | None:
    peak = max((s.kv_cache_usage or 0.0) for s in samples)
    if peak < KV_PRESSURE:
        return None
    fix = _more_gpu_memory(inputs, MIN_GPU_FREE)
    if fix is None:
        return None
    message = (
        f"KV cache peaked at {peak:.0%} while {_gpu_free_fraction(inputs) or 0:.0%} of the "
        "GPU's memory stayed free"
    )
    return Advice("gpu_memory_headroom", "info", message, fix)


RULES = (_kv_saturated, _preemptions, _prefix_cache_low, _context_headroom, _gpu_headroom)


def advise(inputs: AdviceInputs) -> list[Advice]:
    """Every piece of advice that holds now, warnings first; ``[]`` when all looks well.

    Two pieces never set the same flag: the first (more urgent) one keeps it.
    """
    samples = _ok(inputs.metrics)
    if not samples:
        return []
    found: list[Advice] = []
    claimed: set[str] = set()
    for rule in RULES:
        advice = rule(inputs, samples)
        if advice is None:
            continue
        if advice.fix is not None and claimed & set(advice.fix.set):
            continue
        if advice.fix is not None:
            claimed |= set(advice.fix.set)
        found.append(advice)
    return sorted(found, key=lambda a: a.severity != "warn")
