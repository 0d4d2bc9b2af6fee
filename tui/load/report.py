"""The report: a run's records and facts into one typed :class:`BenchResult`.

The numbers are those of :mod:`tui.load.stats` (``calculate_metrics`` and the result keys
of ``serve.py:1280-1411``); the facts are what the runner knows about the run (the model,
what built the prompts, whether it was cancelled, the client's own health). Every key is
a declared field of :class:`BenchResult`, set by keyword here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tui.domain.results import BenchResult, MeasuringClient
from tui.domain.workload import Endpoint
from tui.load.stats import (
    DEFAULT_PERCENTILE_METRICS,
    DEFAULT_PERCENTILES,
    RequestRecord,
    calculate_metrics,
    latency_stats,
    queue_samples,
    server_time_stats,
)


@dataclass(frozen=True)
class RunFacts:
    """What the runner knows about a run besides its records (all but the first optional)."""

    model_id: str = ""
    tokenizer_id: str | None = None
    prompt_tokenizer: str = ""
    endpoint: Endpoint = "completions"
    num_prompts: int | None = None  # None: the number of records
    burstiness: float = 1.0
    num_warmups: int = 0
    duration_limit_s: float | None = None
    cancelled: bool = False
    not_sent: int = 0
    client_input_tokens: int | None = None
    client_cpu_s: float = 0.0
    client_max_loop_lag_ms: float = 0.0
    client_bound_s: float = 0.0
    client: MeasuringClient = "in-loop"


def build_result(
    records: Sequence[RequestRecord],
    dur_s: float,
    *,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    percentile_metrics: Sequence[str] = DEFAULT_PERCENTILE_METRICS,
    goodput: Mapping[str, float] | None = None,
    count_tokens: Callable[[str], int] | None = None,
    max_concurrency: int | None = None,
    request_rate: float = math.inf,
    facts: RunFacts | None = None,
    max_errors: int = 20,
) -> BenchResult:
    """A :class:`BenchResult` in bench serve's keys from request records and run facts.

    ``request_goodput`` stays ``None`` unless SLOs were given, as bench serve writes it
    (``serve.py:1280-1302``). ``errors`` holds the error texts of the first
    ``max_errors`` failed requests (bench serve prints the first 10).
    """
    metrics = calculate_metrics(records, dur_s, goodput=goodput, count_tokens=count_tokens)
    queue = queue_samples(records, max_concurrency, request_rate)
    run = facts or RunFacts()
    return BenchResult(
        duration=dur_s,
        completed=metrics.completed,
        failed=metrics.failed,
        total_input_tokens=metrics.total_input,
        total_output_tokens=metrics.total_output,
        request_throughput=metrics.request_throughput,
        request_goodput=metrics.request_goodput if goodput else None,
        output_throughput=metrics.output_throughput,
        total_token_throughput=metrics.total_token_throughput,
        max_output_tokens_per_s=metrics.max_output_tokens_per_s,
        max_concurrent_requests=metrics.max_concurrent_requests,
        rtfx=0.0,  # audio seconds per second; text workloads have none (serve.py:780)
        stats={
            **latency_stats(metrics, percentiles, percentile_metrics, queue),
            **server_time_stats(records, percentiles),
        },
        model_id=run.model_id,
        tokenizer_id=run.tokenizer_id,
        num_prompts=len(records) if run.num_prompts is None else run.num_prompts,
        request_rate="inf" if math.isinf(request_rate) else float(request_rate),
        burstiness="inf" if math.isinf(run.burstiness) else run.burstiness,
        max_concurrency=max_concurrency,
        endpoint=run.endpoint,
        prompt_tokenizer=run.prompt_tokenizer,
        num_warmups=run.num_warmups,
        duration_limit_s=run.duration_limit_s,
        cancelled=run.cancelled,
        not_sent=run.not_sent,
        aborted_by_server=sum(1 for r in records if r.success and r.aborted_by_server),
        errors=[r.error for r in records if not r.success][:max_errors],
        client_input_tokens=run.client_input_tokens,
        client_cpu_s=run.client_cpu_s,
        client_max_loop_lag_ms=run.client_max_loop_lag_ms,
        client_bound_s=run.client_bound_s,
        client=run.client,
    )
