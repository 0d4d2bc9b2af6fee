"""What cannot start, known before any start: the flag rules, pre-flight, learned regions.

Three sources, cheapest first:

- the flag rules: a choice ``ServeFlags`` refuses is never launched (the strategies get a
  ``ValidationError`` from the spec and record the choice as pruned);
- the pre-flight KV estimate (``tui.domain.preflight``, vLLM 0.32's start-up budget): a
  utilization above the free memory, weights that do not fit, no KV memory left, or one
  ``max_model_len`` request that does not fit the KV cache;
- failed starts: a start that failed for memory marks a region. Any choice at least as
  demanding on every axis (more sequences, more batched tokens, a longer context, a wider
  KV dtype, a lower utilization for a KV shortage; a higher one for a refused utilization;
  everything else equal) would fail the same way, so it is not started.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tui.domain.diagnosis import DiagnosisKind, diagnosis_kind
from tui.domain.errors import one_line
from tui.domain.flags.serve import ServeFlags
from tui.domain.preflight import KvEstimate
from tui.domain.sweep.outcome import TrialOutcome, TrialState
from tui.domain.sweep.tunables import Value

Estimator = Callable[[ServeFlags], KvEstimate | None]

# +1: a higher value needs more memory; -1: a lower one does.
MORE_IS_HEAVIER: Mapping[str, int] = {
    "max_model_len": 1,
    "max_num_batched_tokens": 1,
    "max_num_seqs": 1,
    "max_loras": 1,
    "max_lora_rank": 1,
    "gpu_memory_utilization": -1,
    "cpu_offload_gb": -1,
}
MEMORY_KINDS: frozenset[DiagnosisKind] = frozenset(
    {"kv_cache_too_small", "no_kv_cache_memory", "out_of_memory"}
)


def _kv_bytes(dtype: Value | None) -> int:
    text = str(dtype or "auto")
    return 1 if text.startswith(("fp8", "int8", "int4", "nvfp4", "turbo", "ultra")) else 2


def _heavier_or_equal(name: str, mine: Value | None, failed: Value | None) -> bool:
    """Whether ``mine`` needs at least as much memory as ``failed`` on axis ``name``."""
    if mine == failed:
        return True
    if mine is None or failed is None:
        return False
    direction = MORE_IS_HEAVIER.get(name)
    if direction is not None and isinstance(mine, int | float) and isinstance(failed, int | float):
        return (mine - failed) * direction > 0
    if name == "kv_cache_dtype":
        return _kv_bytes(mine) >= _kv_bytes(failed)
    if name == "enable_lora":
        return bool(mine) >= bool(failed)
    if name == "enforce_eager":  # CUDA graphs (eager off) take memory
        return not mine and bool(failed)
    return False


@dataclass(frozen=True)
class FailedRegion:
    """A failed start's choice and why it failed."""

    params: dict[str, Value]
    kind: DiagnosisKind

    def covers(self, choice: Mapping[str, Value]) -> bool:
        """Whether ``choice`` would fail the same way."""
        if self.kind == "insufficient_free_memory":  # the utilization alone decides
            mine, failed = (
                choice.get("gpu_memory_utilization"),
                self.params.get("gpu_memory_utilization"),
            )
            return isinstance(mine, float) and isinstance(failed, float) and mine >= failed
        names = set(choice) | set(self.params)
        if self.kind in MEMORY_KINDS:
            return all(_heavier_or_equal(n, choice.get(n), self.params.get(n)) for n in names)
        return all(choice.get(n) == self.params.get(n) for n in names)


class Pruner:
    """Decides, before a start, whether a choice can start; learns from failed starts."""

    def __init__(self, estimator: Estimator | None = None) -> None:
        self._estimator = estimator
        self._cache: dict[tuple[str, ...], str | None] = {}
        self.regions: list[FailedRegion] = []

    def preflight(self, flags: ServeFlags) -> str | None:
        """Why ``flags`` cannot start per the KV estimate (``None``: it may). Blocking."""
        key = tuple(flags.to_argv())
        if key in self._cache:
            return self._cache[key]
        reason: str | None = None
        if self._estimator is not None:
            try:
                estimate = self._estimator(flags)
            except Exception:  # an estimate is advice: without one, nothing is pruned
                estimate = None
            if estimate is not None:
                reason = cannot_start(estimate)
        self._cache[key] = reason
        return reason

    def learn(self, outcome: TrialOutcome) -> None:
        """Remember the region a failed start marks."""
        if outcome.state is TrialState.FAILED_START:
            kind = diagnosis_kind(outcome.diagnosis_kind)
            self.regions.append(FailedRegion(dict(outcome.params), kind))

    def learned(self, choice: Mapping[str, Value]) -> str | None:
        """Why ``choice`` would fail like an earlier start (``None``: no such region)."""
        for region in self.regions:
            if region.covers(choice):
                return f"would fail like {_short(region.params)} ({region.kind})"
        return None


def _short(params: Mapping[str, Value]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "the base"


def cannot_start(estimate: KvEstimate) -> str | None:
    """The pre-flight reason a launch will fail, from the estimate's budget (vLLM's order)."""
    b = estimate.budget
    if b is not None and b.kind == "gpu" and b.free_at_start is not None:
        if not b.kv_from_flag and b.free_at_start < b.requested:
            return "pre-flight: utilization asks for more memory than is free"
        if b.weights > b.free_at_start:
            return "pre-flight: the weights do not fit in free memory"
    if estimate.kv_tokens <= 0 or estimate.num_blocks <= 0:
        return "pre-flight: no memory left for the KV cache"
    if not estimate.fits:
        return (
            f"pre-flight: max_model_len {estimate.max_model_len} does not fit "
            f"{estimate.kv_tokens} tokens of KV"
        )
    return None


def explain(exc: Exception) -> str:
    """A flag-rule refusal in one line."""
    return "flag rules: " + one_line(exc)
