"""``vllm bench serve``'s statistics, as pure functions over per-request records.

Everything here mirrors ``vllm/benchmarks/serve.py:573-783`` (``calculate_metrics``) and
``:1280-1391`` (the result keys), as summarised in section 4.2 of
``/work/shared/reference/vllm-0.32-reference.md``. Numbers produced here are meant to
compare key for key with a ``bench serve`` JSON file, so the quirks are kept on purpose:

- failed requests are left out of every statistic (they only count in ``failed``);
- TPOT is ``(latency - ttft) / (output_len - 1)`` and only sampled when ``output_len > 1``,
  yet a TPOT of 0 stands in for the goodput check when ``output_len <= 1``;
- ITLs of all requests are concatenated, so long requests dominate the ITL statistics;
- mean/median/std/percentile use numpy (population std, linear-interpolation percentiles)
  and an empty list gives 0, as ``np.mean(values or 0)`` does;
- the "peak output tokens/s" counts *chunk* arrivals per 1-second bucket, not tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MS_PER_S = 1000.0

#: Percentiles reported by default (bench serve's own default is just "99", ref 4.2).
DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0)
#: Metrics that get mean/median/std/percentiles (bench serve: ttft,tpot,itl; we add e2el).
DEFAULT_PERCENTILE_METRICS: tuple[str, ...] = ("ttft", "tpot", "itl", "e2el")
#: Metrics that may carry statistics; the last two only exist with a concurrency cap (and,
#: for the queue-inclusive latency, a finite rate), as in ``serve.py:1318-1327,1398-1411``.
PERCENTILE_METRICS: tuple[str, ...] = (
    "ttft",
    "tpot",
    "itl",
    "e2el",
    "client_queue_time",
    "e2el_including_client_queue",
)
#: Metrics a goodput SLO may name (``serve.py:1473-1508``).
GOODPUT_METRICS: tuple[str, ...] = ("ttft", "tpot", "e2el")


@dataclass
class RequestRecord:
    """One request's measurement, the fields of bench serve's ``RequestFuncOutput``.

    Times are seconds from ``time.perf_counter()``; ``start_time`` is the ``st`` taken
    right before the POST (ref 4.1). ``prompt_len`` starts as the client's own count and
    is overwritten by ``usage.prompt_tokens``; ``output_tokens`` is
    ``usage.completion_tokens`` (0 when the server sent no usage).
    """

    success: bool = False
    prompt_len: int = 0
    output_tokens: int = 0
    ttft: float = 0.0
    itl: list[float] = field(default_factory=list)
    latency: float = 0.0
    error: str = ""
    start_time: float = 0.0
    queue_time: float = 0.0  # time spent waiting on the concurrency semaphore
    generated_text: str = ""
    # The server itself ended the stream (finish_reason "abort"/"error", e.g. a shutdown
    # with streams open). bench serve still counts it a success (ref 4.1); we keep that
    # and report the count beside it, so a cut-short run is not mistaken for a clean one.
    aborted_by_server: bool = False
    # The server's own times, seconds, when it reports them (vLLM 0.33 with
    # --enable-per-request-metrics: the last usage chunk's metrics.time_to_first_token_ms /
    # queue_time_ms; bench serve's server_ttft / server_queue_time).
    server_ttft: float | None = None
    server_queue_time: float | None = None


@dataclass(frozen=True)
class Metrics:
    """The aggregated numbers of ``calculate_metrics`` (``serve.py:573-783``).

    The raw sample lists (seconds) are kept so statistics can be taken for any set of
    percentiles afterwards.
    """

    completed: int
    failed: int
    total_input: int
    total_output: int
    request_throughput: float
    request_goodput: float
    output_throughput: float
    total_token_throughput: float
    max_output_tokens_per_s: float
    max_concurrent_requests: int
    ttfts: list[float]
    tpots: list[float]
    itls: list[float]
    e2els: list[float]
    actual_output_lens: list[int]

    def samples(self, metric: str) -> list[float]:
        """The raw samples (seconds) for one of ``ttft``, ``tpot``, ``itl``, ``e2el``."""
        by_name = {"ttft": self.ttfts, "tpot": self.tpots, "itl": self.itls, "e2el": self.e2els}
        if metric not in by_name:
            raise ValueError(
                f"unknown metric {metric!r}: expected one of {', '.join(PERCENTILE_METRICS)}"
            )
        return by_name[metric]


def percentile_word(p: float) -> str:
    """How bench serve spells a percentile in a key: ``99`` for 99.0, ``99.9`` for 99.9.

    Mirrors ``p_word = str(int(p)) if int(p) == p else str(p)`` (``serve.py:1385-1391``).
    """
    return str(int(p)) if int(p) == p else str(p)


def percentile_key(p: float, metric: str) -> str:
    """The JSON key of one percentile, e.g. ``p99_ttft_ms`` or ``p99.9_itl_ms``."""
    return f"p{percentile_word(p)}_{metric}_ms"


def validate_percentiles(percentiles: Iterable[float]) -> list[float]:
    """Percentiles as floats, each in [0, 100]; a clear ``ValueError`` otherwise."""
    out: list[float] = []
    for p in percentiles:
        value = float(p)
        if math.isnan(value) or not 0.0 <= value <= 100.0:
            raise ValueError(f"percentile {p!r} must be between 0 and 100")
        out.append(value)
    return out


def validate_percentile_metrics(metrics: Iterable[str]) -> list[str]:
    """Metric names for the statistics blocks; each must be ttft, tpot, itl or e2el."""
    out: list[str] = []
    for name in metrics:
        if name not in PERCENTILE_METRICS:
            raise ValueError(
                f"unknown percentile metric {name!r}: expected one of "
                f"{', '.join(PERCENTILE_METRICS)}"
            )
        out.append(name)
    return out


def validate_goodput(slos: Mapping[str, float]) -> dict[str, float]:
    """A goodput SLO dict (milliseconds), checked as ``serve.py:1473-1492`` does.

    Keys must be ``ttft``, ``tpot`` or ``e2el`` and values must be >= 0.
    """
    out: dict[str, float] = {}
    for name, value in slos.items():
        if name not in GOODPUT_METRICS:
            raise ValueError(
                f"Invalid metric name found, {name}: {value}. The service level objective "
                f"name should be one of {list(GOODPUT_METRICS)}. "
            )
        number = float(value)
        if math.isnan(number) or number < 0:
            raise ValueError(
                f"Invalid value found, {name}: {value}. The service level objective value "
                "should be non-negative."
            )
        out[name] = number
    return out


def parse_goodput(items: Iterable[str]) -> dict[str, float]:
    """Parse ``["ttft:200", "tpot:50"]`` (bench serve's ``--goodput KEY:MS`` form)."""
    slos: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition(":")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or not name.strip() or math.isnan(number):
            # bench serve's wording (serve.py:1496-1508), plus the offending pair.
            raise ValueError(
                "Invalid format found for service level objectives. "
                'Specify service level objectives for goodput as "KEY:VALUE" '
                "pairs, where the key is a metric name, and the value is a "
                f"number in milliseconds. Got {item!r}."
            )
        slos[name.strip()] = number
    return validate_goodput(slos)


def summarize(values: Sequence[float], percentiles: Sequence[float]) -> dict[str, float]:
    """mean/median/std and percentiles of ``values`` (seconds), in milliseconds.

    numpy semantics (``serve.py:753-777``): population std (``ddof=0``),
    ``np.percentile`` with linear interpolation, and ``values or 0`` so that an empty
    list yields 0 everywhere. Keys: ``mean``, ``median``, ``std`` and one
    ``percentile_word(p)`` per percentile.
    """
    data: list[float] | float = list(values) or 0.0
    out = {
        "mean": float(np.mean(data)) * MS_PER_S,
        "median": float(np.median(data)) * MS_PER_S,
        "std": float(np.std(data)) * MS_PER_S,
    }
    for p in percentiles:
        out[percentile_word(p)] = float(np.percentile(data, p)) * MS_PER_S
    return out


def peak_rates(successes: Sequence[RequestRecord]) -> tuple[float, int]:
    """``(max_output_tokens_per_s, max_concurrent_requests)`` per ``serve.py:685-724``.

    Buckets are whole seconds from the earliest successful start. Every chunk arrival
    (``start + ttft + cumsum(itl)``) adds 1 to its bucket; every request adds 1 to each
    bucket from its start second to its end second inclusive, so a request that spans a
    bucket boundary counts in both (hence "peak concurrent" can exceed the semaphore).
    """
    if not successes:
        return 0.0, 0
    min_start = min(r.start_time for r in successes)
    max_end = max(r.start_time + r.latency for r in successes)
    buckets = int(np.ceil(max_end - min_start)) + 1
    tokens = np.zeros(buckets)
    concurrent = np.zeros(buckets)
    for record in successes:
        arrival = record.start_time + record.ttft
        arrivals = [arrival]
        for gap in record.itl:
            arrival += gap
            arrivals.append(arrival)
        for t in arrivals:
            bucket = int(t - min_start)
            if 0 <= bucket < buckets:
                tokens[bucket] += 1
        first = int(record.start_time - min_start)
        last = int(record.start_time + record.latency - min_start)
        # last <= int(max_end - min_start) < buckets, so this never runs past the end.
        for second in range(first, last + 1):
            concurrent[second] += 1
    return float(np.max(tokens)), int(np.max(concurrent))


def actual_output_len(
    record: RequestRecord, count_tokens: Callable[[str], int] | None = None
) -> int:
    """A successful request's output length (``serve.py:607-622``).

    ``usage.completion_tokens``; without it, the generated text's token count, or 1
    when there is no tokenizer.
    """
    if record.output_tokens:
        return record.output_tokens
    return count_tokens(record.generated_text) if count_tokens else 1


def detailed_fields(
    records: Sequence[RequestRecord], count_tokens: Callable[[str], int] | None = None
) -> dict[str, list[Any]]:
    """The per-request lists ``--save-detailed`` adds (``serve.py:1280-1302``).

    One entry per request in order, failed ones included (output length 0), under
    bench serve's keys: ``input_lens``, ``output_lens``, ``ttfts``, ``itls``,
    ``latencies``, ``start_times``, ``queue_times``, ``generated_texts``, ``errors``.
    """
    return {
        "input_lens": [r.prompt_len for r in records],
        "output_lens": [actual_output_len(r, count_tokens) if r.success else 0 for r in records],
        "ttfts": [r.ttft for r in records],
        "itls": [list(r.itl) for r in records],
        "latencies": [r.latency for r in records],
        "start_times": [r.start_time for r in records],
        "queue_times": [r.queue_time for r in records],
        "generated_texts": [r.generated_text for r in records],
        "errors": [r.error for r in records],
    }


def calculate_metrics(
    records: Sequence[RequestRecord],
    dur_s: float,
    *,
    goodput: Mapping[str, float] | None = None,
    count_tokens: Callable[[str], int] | None = None,
) -> Metrics:
    """Aggregate request records the way ``calculate_metrics`` does (``serve.py:573-783``).

    ``dur_s`` is the benchmark duration (from just before the first dispatch to the
    gather, ref 4.2); a duration of 0 gives throughputs of 0 rather than a division
    error. ``goodput`` maps ``ttft``/``tpot``/``e2el`` to SLOs in milliseconds; a request
    is good iff every given metric is <= its SLO. ``count_tokens`` counts generated text
    when the server sent no ``completion_tokens`` (bench serve uses its tokenizer there,
    or 1 when it has none, ``serve.py:607-622``).
    """
    if dur_s < 0 or math.isnan(dur_s):
        raise ValueError(f"duration must be >= 0 seconds, got {dur_s}")
    slos = validate_goodput(goodput or {})

    actual_output_lens: list[int] = []
    total_input = 0
    completed = 0
    ttfts: list[float] = []
    tpots: list[float] = []
    all_tpots: list[float] = []  # with 0 for output_len <= 1, for the goodput check only
    itls: list[float] = []
    e2els: list[float] = []
    for record in records:
        if not record.success:
            actual_output_lens.append(0)
            continue
        output_len = actual_output_len(record, count_tokens)
        actual_output_lens.append(output_len)
        total_input += record.prompt_len
        tpot = 0.0
        if output_len > 1:
            tpot = (record.latency - record.ttft) / (output_len - 1)
            tpots.append(tpot)
        all_tpots.append(tpot)
        itls.extend(record.itl)
        ttfts.append(record.ttft)
        e2els.append(record.latency)
        completed += 1

    good = 0
    if slos:
        per_metric = {"ttft": ttfts, "tpot": all_tpots, "e2el": e2els}
        chosen = [(per_metric[name], slo / MS_PER_S) for name, slo in slos.items()]
        for i in range(completed):
            if all(samples[i] <= limit for samples, limit in chosen):
                good += 1

    successes = [r for r in records if r.success]
    max_tokens_per_s, max_concurrent = peak_rates(successes)
    total_output = sum(actual_output_lens)

    def per_second(count: float) -> float:
        return count / dur_s if dur_s > 0 else 0.0

    return Metrics(
        completed=completed,
        failed=len(records) - completed,
        total_input=total_input,
        total_output=total_output,
        request_throughput=per_second(completed),
        request_goodput=per_second(good),
        output_throughput=per_second(total_output),
        total_token_throughput=per_second(total_input + total_output),
        max_output_tokens_per_s=max_tokens_per_s,
        max_concurrent_requests=max_concurrent,
        ttfts=ttfts,
        tpots=tpots,
        itls=itls,
        e2els=e2els,
        actual_output_lens=actual_output_lens,
    )


def queue_samples(
    records: Sequence[RequestRecord], max_concurrency: int | None, request_rate: float
) -> dict[str, list[float]]:
    """The client-side queue samples bench serve adds under a concurrency cap.

    ``client_queue_time`` (the wait for the semaphore) of the successes when
    ``max_concurrency`` is set, and ``e2el_including_client_queue`` when the rate is also
    finite (``serve.py:1318-1327``); absent otherwise, so no keys are written for them.
    """
    if max_concurrency is None:
        return {}
    ok = [r for r in records if r.success]
    out = {"client_queue_time": [r.queue_time for r in ok]}
    if not math.isinf(request_rate):
        out["e2el_including_client_queue"] = [r.latency + r.queue_time for r in ok]
    return out


def server_time_stats(
    records: Sequence[RequestRecord], percentiles: Sequence[float] = DEFAULT_PERCENTILES
) -> dict[str, float]:
    """``mean_/median_/p{P}_server_ttft_ms`` and ``..._server_queue_time_ms`` over the
    requests whose server reported its times (none: no keys). vtc's, beside bench serve's
    client-side TTFT, so the two can be read side by side."""
    out: dict[str, float] = {}
    for name, values in (
        ("server_ttft", [r.server_ttft for r in records if r.server_ttft is not None]),
        (
            "server_queue_time",
            [r.server_queue_time for r in records if r.server_queue_time is not None],
        ),
    ):
        if not values:
            continue
        chosen = validate_percentiles(percentiles)
        summary = summarize(values, chosen)
        out[f"mean_{name}_ms"] = summary["mean"]
        out[f"median_{name}_ms"] = summary["median"]
        for p in chosen:
            out[percentile_key(p, name)] = summary[percentile_word(p)]
    return out


def latency_stats(
    metrics: Metrics,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    percentile_metrics: Sequence[str] = DEFAULT_PERCENTILE_METRICS,
    queue: Mapping[str, Sequence[float]] | None = None,
) -> dict[str, float]:
    """The ``mean_/median_/std_{m}_ms`` and ``p{P}_{m}_ms`` keys (``serve.py:1355-1411``).

    ``queue`` holds the :func:`queue_samples`; a queue metric asked for without its
    samples writes no keys, as bench serve.
    """
    chosen_percentiles = validate_percentiles(percentiles)
    out: dict[str, float] = {}
    for metric in validate_percentile_metrics(percentile_metrics):
        if metric in ("client_queue_time", "e2el_including_client_queue"):
            if queue is None or metric not in queue:
                continue
            samples: Sequence[float] = queue[metric]
        else:
            samples = metrics.samples(metric)
        summary = summarize(samples, chosen_percentiles)
        out[f"mean_{metric}_ms"] = summary["mean"]
        out[f"median_{metric}_ms"] = summary["median"]
        out[f"std_{metric}_ms"] = summary["std"]
        for p in chosen_percentiles:
            out[percentile_key(p, metric)] = summary[percentile_word(p)]
    return out
