"""vLLM's latency histograms read off a parsed /metrics page.

Names: reference section 3 (``v1/metrics/loggers.py`` of vLLM 0.32.0). Each histogram is
exported per engine (``engine`` label, one per data-parallel rank); the engines' buckets
are summed by ``le``, as ``sum by (le) (...)`` does before ``histogram_quantile``.

Older names, read when the new one is absent: vLLM's V0 engine and V1 before the rename
exported the inter-token latency as ``vllm:time_per_output_token_seconds`` (V0
``engine/metrics.py``: "Histogram of time per output token in seconds", ITL buckets);
0.32 calls it ``vllm:inter_token_latency_seconds`` and uses
``vllm:request_time_per_output_token_seconds`` for the per-request TPOT, a different
measurement that is never read in its place.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from prometheus_client.samples import Sample

from tui.domain.quantiles import histogram_from_buckets
from tui.domain.telemetry import Histogram

# ServerLatency field -> histogram names, newest first.
LATENCY_HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "e2el": ("vllm:e2e_request_latency_seconds",),
    "queue": ("vllm:request_queue_time_seconds",),
    "prefill": ("vllm:request_prefill_time_seconds",),
    "decode": ("vllm:request_decode_time_seconds",),
}
# Request sizes (tokens), for the max_model_len headroom advice.
PROMPT_TOKENS_HISTOGRAM = "vllm:request_prompt_tokens"
GENERATION_TOKENS_HISTOGRAM = "vllm:request_generation_tokens"


def _le(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)  # "+Inf" parses as inf
    except ValueError:
        return None
    return None if math.isnan(value) else value


def read_histogram(by_name: Mapping[str, Sequence[Sample]], name: str) -> Histogram | None:
    """The histogram ``name`` summed over its label sets; ``None`` when the page lacks it."""
    bucket_samples = by_name.get(name + "_bucket")
    if not bucket_samples:
        return None
    pairs = []
    for s in bucket_samples:
        bound = _le(s.labels.get("le"))
        if bound is not None:
            pairs.append((bound, float(s.value)))
    if not pairs:
        return None
    total = float(sum(s.value for s in by_name.get(name + "_sum", ())))
    stamps = [float(s.value) for s in by_name.get(name + "_created", ())]
    # The newest stamp: a restart of any engine moves it (a restart also drops its counts).
    return histogram_from_buckets(pairs, total, max(stamps) if stamps else None)


def latency_histograms(by_name: Mapping[str, Sequence[Sample]]) -> dict[str, Histogram]:
    """Every latency histogram on the page, by ``ServerLatency`` field name."""
    found: dict[str, Histogram] = {}
    for field_name, names in LATENCY_HISTOGRAMS.items():
        for name in names:
            hist = read_histogram(by_name, name)
            if hist is not None:
                found[field_name] = hist
                break
    return found
