"""``vtc bench``: a headless load run with ``vllm bench serve``'s flags, output and JSON.

Where the two tools overlap the flag names are bench serve's (``--base-url``, ``--model``,
``--endpoint``, ``--dataset-name``, ``--random-input-len``, ``--num-prompts``,
``--max-concurrency``, ``--request-rate``, ``--burstiness``, ``--goodput``,
``--percentile-metrics``, ``--metric-percentiles``, ``--save-result``,
``--result-filename``...), the summary printed is bench serve's block, line for line
(``serve.py:1181-1237``), and the result file has bench serve's keys
(``serve.py:1280-1391``, plus its ``--save-detailed`` lists), so either tool's files
compare key for key. Differences: percentiles default to 50,90,99 and the metrics to
ttft,tpot,itl,e2el; ``--dataset-name shared-prefix`` with ``--cache-hit-pct``, and
``--duration``, ``--request-timeout`` and ``--transport`` are ours; a live line goes to
stderr once a second (``--disable-tqdm`` turns it off); Ctrl-C cancels every stream and
still prints and saves the partial result.

Wiring (in ``tui/cli.py``)::

    add_bench_parser(subparsers)          # registers "bench"
    ... if args.command == "bench": return run_bench(args)

Also runnable on its own: ``python -m tui.load.bench_cli [flags]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import signal
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import aiohttp

from tui.domain.results import BenchResult
from tui.domain.workload import LoadProgress, LoadSpec
from tui.load.client import resolve_api_key
from tui.load.datasets import (
    DEFAULT_CUSTOM_OUTPUT_LEN,
    DatasetError,
    custom_prompts,
    expected_hit_pct,
    shared_prefix_spec,
    sharegpt_prompts,
)
from tui.load.live import LiveProgress
from tui.load.prompts import PromptRequest, Tokenizer
from tui.load.runner import LoadRunner
from tui.load.stats import (
    detailed_fields,
    parse_goodput,
    percentile_word,
    validate_percentile_metrics,
    validate_percentiles,
)
from tui.load.tokenizer import APPROX_NAME, load_tokenizer

PROG = "vtc bench"
DATASETS = ("random", "shared-prefix", "custom", "sharegpt")
ENDPOINTS = {"/v1/completions": "completions", "/v1/chat/completions": "chat"}
BACKENDS = ("openai", "vllm", "openai-chat")
METRIC_HEADERS = {
    "ttft": ("TTFT", "Time to First Token"),
    "tpot": ("TPOT", "Time per Output Token (excl. 1st token)"),
    "itl": ("ITL", "Inter-token Latency"),
    "e2el": ("E2EL", "End-to-end Latency"),
}
DETAILED_KEYS = (
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "latencies",
    "start_times",
    "queue_times",
    "generated_texts",
    "errors",
)


class BenchError(Exception):
    """A run that cannot start, with the message to print."""


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """Every ``vtc bench`` option, on ``parser``."""
    target = parser.add_argument_group("server")
    target.add_argument("--base-url", default=None, help="Server base URL (else host/port).")
    target.add_argument("--host", default="127.0.0.1")
    target.add_argument("--port", type=int, default=8000)
    target.add_argument(
        "--endpoint",
        default="/v1/completions",
        choices=sorted(ENDPOINTS),
        help="API endpoint (default /v1/completions).",
    )
    target.add_argument(
        "--backend",
        default="openai",
        choices=BACKENDS,
        help="Accepted for bench serve compatibility; openai-chat implies the chat endpoint.",
    )
    target.add_argument(
        "--model", default=None, help="Model name to send (default: the server's first)."
    )
    target.add_argument(
        "--tokenizer",
        default=None,
        help="Folder with tokenizer.json for building prompts (default: the model's).",
    )
    target.add_argument(
        "--transport",
        default="aiohttp",
        choices=("aiohttp", "httpx"),
        help="HTTP client library for the streams (aiohttp is the faster).",
    )
    target.add_argument(
        "--request-timeout",
        type=_positive_float,
        default=600.0,
        help="Seconds before one request is failed (default 600).",
    )

    data = parser.add_argument_group("workload")
    data.add_argument("--dataset-name", default="random", choices=DATASETS)
    data.add_argument("--dataset-path", default=None, help="JSONL (custom) or JSON (sharegpt).")
    data.add_argument("--num-prompts", type=_positive_int, default=1000)
    data.add_argument("--random-input-len", type=_positive_int, default=1024)
    data.add_argument("--random-output-len", type=_positive_int, default=128)
    data.add_argument("--random-range-ratio", type=float, default=0.0)
    data.add_argument("--random-prefix-len", type=_non_negative_int, default=0)
    data.add_argument("--input-len", type=_positive_int, default=None, help="Alias.")
    data.add_argument("--output-len", type=_positive_int, default=None, help="Alias.")
    data.add_argument(
        "--cache-hit-pct",
        type=float,
        default=50.0,
        help="shared-prefix: percent of --random-input-len shared by every prompt.",
    )
    data.add_argument("--custom-output-len", type=int, default=DEFAULT_CUSTOM_OUTPUT_LEN)
    data.add_argument("--sharegpt-output-len", type=_positive_int, default=None)
    data.add_argument("--disable-shuffle", action="store_true")
    data.add_argument("--no-oversample", action="store_true")
    data.add_argument(
        "--skip-chat-template", action="store_true", help="Accepted; prompts are sent as is."
    )
    data.add_argument("--seed", type=int, default=0)

    traffic = parser.add_argument_group("traffic")
    traffic.add_argument("--request-rate", type=_positive_float, default=math.inf)
    traffic.add_argument("--burstiness", type=_positive_float, default=1.0)
    traffic.add_argument("--max-concurrency", type=int, default=None)
    traffic.add_argument("--num-warmups", type=_non_negative_int, default=0)
    traffic.add_argument(
        "--duration",
        type=_positive_float,
        default=None,
        help="Send for this many seconds instead of --num-prompts requests.",
    )
    traffic.add_argument("--ignore-eos", action="store_true")
    traffic.add_argument("--temperature", type=float, default=None)

    stats = parser.add_argument_group("statistics and results")
    stats.add_argument("--goodput", nargs="+", default=None, metavar="KEY:MS")
    stats.add_argument("--percentile-metrics", default="ttft,tpot,itl,e2el")
    stats.add_argument("--metric-percentiles", default="50,90,99")
    stats.add_argument("--save-result", action="store_true")
    stats.add_argument("--save-detailed", action="store_true")
    stats.add_argument("--result-dir", default=None)
    stats.add_argument("--result-filename", default=None)
    stats.add_argument("--label", default=None)
    stats.add_argument("--metadata", nargs="*", default=None, metavar="KEY=VALUE")
    stats.add_argument(
        "--disable-tqdm", action="store_true", help="No live progress line on stderr."
    )


def add_bench_parser(subparsers: Any) -> None:
    """Register ``bench`` on an ``argparse`` subparsers object."""
    parser = subparsers.add_parser(
        "bench",
        help="run a load against a server, vllm bench serve style",
        description=(
            "Load an OpenAI-compatible server and report vllm bench serve's numbers "
            "(same flags where they overlap, same summary, same result keys)."
        ),
    )
    add_bench_arguments(parser)


def _endpoint(args: argparse.Namespace) -> str:
    if args.backend == "openai-chat" and args.endpoint == "/v1/completions":
        return "chat"
    return ENDPOINTS[args.endpoint]


def _base_url(args: argparse.Namespace) -> str:
    if args.base_url:
        return str(args.base_url).rstrip("/")
    host = f"[{args.host}]" if ":" in args.host else args.host
    return f"http://{host}:{args.port}"


def build_spec(args: argparse.Namespace) -> LoadSpec:
    """The :class:`LoadSpec` of the parsed flags (``ValueError`` on bad combinations)."""
    input_len = args.input_len or args.random_input_len
    output_len = args.output_len or args.random_output_len
    if not 0.0 <= args.random_range_ratio < 1.0:
        raise ValueError("--random-range-ratio must be in [0, 1)")
    if args.max_concurrency is not None and args.max_concurrency <= 0:
        raise ValueError("--max-concurrency must be greater than 0")
    spec = LoadSpec(
        endpoint=_endpoint(args),  # type: ignore[arg-type]
        input_len=input_len,
        output_len=output_len,
        range_ratio=args.random_range_ratio,
        prefix_len=args.random_prefix_len,
        num_prompts=args.num_prompts,
        max_concurrency=args.max_concurrency,
        request_rate=args.request_rate,
        burstiness=args.burstiness,
        seed=args.seed,
        # bench serve forces ignore_eos for random datasets (serve.py:2133-2139).
        ignore_eos=args.ignore_eos or args.dataset_name in ("random", "shared-prefix"),
        request_timeout_s=args.request_timeout,
    )
    if args.dataset_name == "shared-prefix":
        spec = shared_prefix_spec(spec, args.cache_hit_pct)
    return spec


def file_prompts(args: argparse.Namespace, tokenizer: Tokenizer) -> list[PromptRequest] | None:
    """The prompts of a ``custom`` or ``sharegpt`` dataset; None for generated ones."""
    if args.dataset_name in ("random", "shared-prefix"):
        if args.dataset_path:
            raise DatasetError(f"Cannot use '{args.dataset_name}' dataset with --dataset-path.")
        return None
    if not args.dataset_path:
        raise DatasetError(f"--dataset-name {args.dataset_name} needs --dataset-path")
    common = {
        "seed": args.seed,
        "shuffle": not args.disable_shuffle,
        "oversample": not args.no_oversample,
    }
    if args.dataset_name == "custom":
        output = args.output_len or args.custom_output_len
        return custom_prompts(
            args.dataset_path, tokenizer, args.num_prompts, output_len=output, **common
        )
    output = args.output_len or args.sharegpt_output_len
    return sharegpt_prompts(
        args.dataset_path, tokenizer, args.num_prompts, output_len=output, **common
    )


async def first_model(base_url: str, api_key: str | None) -> tuple[str, str]:
    """``(id, root)`` of the server's first model (``serve.py:156-183``)."""
    url = f"{base_url.removesuffix('/v1')}/v1/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
            session.get(url, headers=headers) as response,
        ):
            response.raise_for_status()
            data = await response.json()
    except (aiohttp.ClientError, TimeoutError, json.JSONDecodeError) as exc:
        raise BenchError(f"Failed to fetch models from server at {url}: {exc}") from exc
    models = data.get("data") if isinstance(data, dict) else None
    if not models:
        raise BenchError(f"No models found on the server at {base_url}.")
    first = models[0]
    return str(first["id"]), str(first.get("root") or first["id"])


def _line(out: TextIO, label: str, value: Any) -> None:
    if isinstance(value, float):
        out.write(f"{label:<40} {value:<10.2f}\n")
    else:
        out.write(f"{label:<40} {value!s:<10}\n")


def print_summary(
    result: BenchResult,
    out: TextIO,
    *,
    goodput: bool,
    percentile_metrics: list[str],
    percentiles: list[float],
) -> None:
    """bench serve's result block (``serve.py:1181-1237,1382-1391``)."""
    flat = result.to_bench_json()
    out.write("{s:{c}^{n}}\n".format(s=" Serving Benchmark Result ", n=50, c="="))
    _line(out, "Successful requests:", result.completed)
    _line(out, "Failed requests:", result.failed)
    if result.max_concurrency is not None:
        _line(out, "Maximum request concurrency:", result.max_concurrency)
    if result.request_rate != "inf":
        _line(out, "Request rate configured (RPS):", float(result.request_rate))
    _line(out, "Benchmark duration (s):", result.duration)
    _line(out, "Total input tokens:", result.total_input_tokens)
    _line(out, "Total generated tokens:", result.total_output_tokens)
    _line(out, "Request throughput (req/s):", result.request_throughput)
    if goodput and result.request_goodput is not None:
        _line(out, "Request goodput (req/s):", result.request_goodput)
    _line(out, "Output token throughput (tok/s):", result.output_throughput)
    _line(
        out,
        "Peak output token throughput (tok/s):",
        float(flat.get("max_output_tokens_per_s", 0.0)),
    )
    _line(out, "Peak concurrent requests:", float(flat.get("max_concurrent_requests", 0)))
    _line(out, "Total token throughput (tok/s):", result.total_token_throughput)
    for metric in percentile_metrics:
        short, header = METRIC_HEADERS[metric]
        out.write("{s:{c}^{n}}\n".format(s=header, n=50, c="-"))
        _line(out, f"Mean {short} (ms):", result.stats[f"mean_{metric}_ms"])
        _line(out, f"Median {short} (ms):", result.stats[f"median_{metric}_ms"])
        for p in percentiles:
            word = percentile_word(p)
            _line(out, f"P{word} {short} (ms):", result.stats[f"p{word}_{metric}_ms"])
    out.write("=" * 50 + "\n")


def progress_line(progress: LoadProgress, duration_s: float | None) -> str:
    """One live line: counts, token rate, rolling percentiles, the client's own health."""

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}" if value >= 10 else f"{value:.1f}"

    total = f"/{progress.total}" if progress.total and duration_s is None else ""
    limit = f"/{duration_s:.0f}" if duration_s else ""
    text = (
        f"[{progress.elapsed:5.0f}{limit}s] done {progress.done}{total} "
        f"failed {progress.failed} in flight {progress.in_flight} | "
        f"{progress.output_tokens_per_s:,.0f} tok/s | "
        f"TTFT p50 {ms(progress.ttft_p50_ms)} p99 {ms(progress.ttft_p99_ms)} ms | "
        f"ITL p50 {ms(progress.itl_p50_ms)} p99 {ms(progress.itl_p99_ms)} ms"
    )
    if isinstance(progress, LiveProgress):
        cpu = "-" if progress.client_cpu_pct is None else f"{progress.client_cpu_pct:.0f}%"
        text += f" | client lag {ms(progress.loop_lag_mean_ms)} ms cpu {cpu}"
        if progress.client_bound:
            text += " CLIENT-BOUND"
    return text


def result_json(
    result: BenchResult,
    args: argparse.Namespace,
    model_id: str,
    label: str,
    now: datetime,
    details: dict[str, list[Any]] | None,
) -> dict[str, Any]:
    """The file bench serve writes (``serve.py:2255-2291``), keys in its order."""
    head: dict[str, Any] = {
        "date": now.strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": args.backend,
        "backend": args.backend,
        "label": label,
        "model_id": model_id,
    }
    for item in args.metadata or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise BenchError("Invalid metadata format. Please use KEY=VALUE format.")
        head[key.strip()] = value.strip()
    body = result.to_bench_json()
    head.update(
        {
            "tokenizer_id": body.pop("tokenizer_id", None),
            "num_prompts": body.pop("num_prompts", args.num_prompts),
            "request_rate": "inf" if math.isinf(args.request_rate) else args.request_rate,
            "burstiness": args.burstiness,
            "max_concurrency": args.max_concurrency,
        }
    )
    body.pop("model_id", None)
    # bench serve's "errors" is per request and only in detailed files; the first
    # failures' texts go under their own key.
    body["failed_errors"] = body.pop("errors", [])
    merged = {**head, **body}
    if details is not None:
        merged.update(details)
    return merged


def result_path(args: argparse.Namespace, model_id: str, label: str, now: datetime) -> Path:
    """bench serve's file name rule (``serve.py:1546-1587``)."""
    if args.result_filename:
        name = args.result_filename
    else:
        concurrency = (
            f"-concurrency{args.max_concurrency}" if args.max_concurrency is not None else ""
        )
        base_model = model_id.split("/")[-1]
        stamp = now.strftime("%Y%m%d-%H%M%S")
        name = f"{label}-{args.request_rate}qps{concurrency}-{base_model}-{stamp}.json"
    path = Path(name)
    if args.result_dir:
        path = Path(args.result_dir) / name
    return path


async def run_async(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The bench run itself; see :func:`run_bench`."""
    percentiles = validate_percentiles(
        float(p) for p in str(args.metric_percentiles).split(",") if p.strip()
    )
    metrics = validate_percentile_metrics(
        m.strip() for m in str(args.percentile_metrics).split(",") if m.strip()
    )
    goodput = parse_goodput(args.goodput) if args.goodput else {}
    spec = build_spec(args)
    base_url = _base_url(args)
    api_key = resolve_api_key(None)
    if args.model is None:
        model, root = await first_model(base_url, api_key)
        out.write(f"First model name: {model}, first model id: {root}\n")
    else:
        model, root = args.model, args.model
    tokenizer, tokenizer_name = load_tokenizer(root, args.tokenizer)
    prompts = file_prompts(args, tokenizer)
    if args.dataset_name == "shared-prefix":
        specials = tokenizer.num_special_tokens_to_add()
        total = spec.prefix_len + spec.input_len - specials
        for block in (16, 128):
            hit = expected_hit_pct(spec.prefix_len, total, block, specials)
            out.write(
                f"Shared prefix: {spec.prefix_len} of ~{total + specials} prompt tokens; "
                f"expected prefix-cache hit rate {hit:.1f}% with block size {block}\n"
            )
    runner = LoadRunner(
        transport=args.transport,
        tokenizer=tokenizer,
        percentiles=percentiles,
        percentile_metrics=metrics,
        goodput=goodput,
        temperature=args.temperature,
        collect_text=args.save_detailed,
        freeze_gc=True,
    )
    out.write(f"Tokenizer: {tokenizer_name}\n")
    out.write(f"Traffic request rate: {args.request_rate}\n")
    out.write(
        f"Burstiness factor: {args.burstiness} "
        f"({'Poisson process' if args.burstiness == 1.0 else 'Gamma distribution'})\n"
    )
    out.write(f"Maximum request concurrency: {args.max_concurrency}\n")
    out.flush()

    def show(progress: LoadProgress) -> None:
        if not args.disable_tqdm:
            err.write(progress_line(progress, args.duration) + "\n")
            err.flush()

    loop = asyncio.get_running_loop()
    interrupted = False

    def interrupt() -> None:
        nonlocal interrupted
        interrupted = True
        runner.cancel_nowait()  # every stream at once; the partial result is kept

    installed = False
    try:
        loop.add_signal_handler(signal.SIGINT, interrupt)
        installed = True
    except (NotImplementedError, RuntimeError):
        pass
    try:
        result = await runner.run(
            spec,
            base_url=base_url,
            model=model,
            on_progress=show,
            prompts=prompts,
            duration_s=args.duration,
            num_warmups=args.num_warmups,
        )
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)
    print_summary(
        result, out, goodput=bool(goodput), percentile_metrics=metrics, percentiles=percentiles
    )
    _report_client(result, err)
    if args.save_result or args.save_detailed or args.result_filename:
        label = args.label or "vtc"
        now = datetime.now()
        details = None
        if args.save_detailed:
            count = getattr(tokenizer, "count", None)
            details = detailed_fields(runner.last_records, count)
        data = result_json(result, args, root, label, now, details)
        path = result_path(args, root, label, now)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=None), encoding="utf-8")
        out.write(f"Result saved to {path}\n")
    out.flush()
    if interrupted:
        return 130
    return 0 if result.completed else 1


def _report_client(result: BenchResult, err: TextIO) -> None:
    """Failed requests' errors and the client's own health, to stderr."""
    flat = result.to_bench_json()
    if result.errors:
        err.write(f"{result.failed} failed request(s); first errors:\n")
        for text in dict.fromkeys(result.errors[:10]):
            err.write(f"  {text}\n")
    client_input = flat.get("client_input_tokens")
    if isinstance(client_input, int) and result.total_input_tokens:
        off = 100.0 * (client_input - result.total_input_tokens) / result.total_input_tokens
        if abs(off) >= 5.0:
            hint = (
                "point --tokenizer at the model's folder (tokenizer.json)"
                if flat.get("tokenizer_id") == APPROX_NAME
                else "the server tokenizes differently from that tokenizer.json"
            )
            err.write(
                f"note: the client counted {client_input} input tokens, the server "
                f"{result.total_input_tokens} ({off:+.1f}%): prompts were sized with "
                f"{flat.get('tokenizer_id')}; {hint}\n"
            )
    bound_s = float(flat.get("client_bound_s") or 0.0)
    if result.duration > 0 and bound_s >= 0.2 * result.duration:
        err.write(
            f"warning: the client was the bottleneck for {bound_s:.0f} s of "
            f"{result.duration:.0f} s (event loop late by up to "
            f"{float(flat.get('client_max_loop_lag_ms') or 0):.0f} ms): latencies include "
            "the client's own delay; lower --max-concurrency or run the client on a freer core\n"
        )
    err.flush()


def run_bench(args: argparse.Namespace) -> int:
    """Run ``vtc bench`` for parsed ``args``; the exit code.

    0 when at least one request completed, 1 when none did or the run could not start
    (the reason goes to stderr), 130 after Ctrl-C (partial result printed and saved).
    """
    try:
        return asyncio.run(run_async(args, sys.stdout, sys.stderr))
    except (BenchError, DatasetError, ValueError) as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 1


def main(argv: list[str] | None = None) -> int:
    """``python -m tui.load.bench_cli``: the same as ``vtc bench``."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    add_bench_arguments(parser)
    return run_bench(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
