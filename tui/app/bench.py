"""``vtc bench``: a headless load run with ``vllm bench serve``'s flags, output and JSON.

Where the two tools overlap the flag names are bench serve's (``--base-url``, ``--model``,
``--endpoint``, ``--dataset-name``, ``--random-input-len``, ``--num-prompts``,
``--max-concurrency``, ``--request-rate``, ``--burstiness``, ``--goodput``,
``--percentile-metrics``, ``--metric-percentiles``, ``--save-result``,
``--result-filename``...; the workload's are rendered from ``LoadSpec``, see
:mod:`tui.load.bench_args`), the summary printed is bench serve's block, line for line
(``serve.py:1181-1237``), and the result file has bench serve 0.32's keys, defaults and
file name (:mod:`tui.load.result_file`), so either tool's files compare key for key.
Differences: percentiles default to 50,90,99 and the metrics to ttft,tpot,itl,e2el;
``--dataset-name shared-prefix`` with ``--cache-hit-pct``, and ``--duration``,
``--request-timeout`` and ``--transport`` are ours; a live line goes to stderr once a
second (``--disable-tqdm`` turns it off); Ctrl-C cancels every stream and still prints and
saves the partial result.

Before anything is sent: prompt and output lengths above the server's ``max_model_len``
(from ``/v1/models``) are refused, a workload too big for the client's memory is refused
(:mod:`tui.load.budget`), and the result file's folder must be writable. After the run a
result is never lost: if it cannot be written where asked, it goes to vtc's data folder
and the line says where.

Also runnable on its own: ``python -m tui.app.bench [flags]``.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import aiohttp

from tui.app.arg_parser import OneLineParser
from tui.domain.errors import VtcError
from tui.domain.results import BenchResult
from tui.domain.url_credentials import UrlCredential, authorization_header, split_url
from tui.domain.workload import LoadProgress, LoadSpec
from tui.load.bench_args import (
    GENERATED,
    BenchError,
    add_bench_arguments,
    add_bench_parser,
    base_url,
    build_spec,
)
from tui.load.budget import check_context, longest_output, longest_prompt
from tui.load.client import resolve_api_key
from tui.load.datasets import custom_prompts, expected_hit_pct, sharegpt_prompts
from tui.load.prompts import PromptRequest, Tokenizer
from tui.load.result_file import check_writable, result_json, result_path, save
from tui.load.runner import LoadRunner
from tui.load.stats import (
    parse_goodput,
    percentile_word,
    validate_percentile_metrics,
    validate_percentiles,
)
from tui.load.tokenizer import APPROX_NAME, load_tokenizer
from tui.server.attached_config import MODELS_MAX_BYTES
from tui.store.bounded_read import parse_json

__all__ = ["add_bench_arguments", "add_bench_parser", "main", "run_bench"]

PROG = "vtc bench"
METRIC_HEADERS = {
    "ttft": ("TTFT", "Time to First Token"),
    "tpot": ("TPOT", "Time per Output Token (excl. 1st token)"),
    "itl": ("ITL", "Inter-token Latency"),
    "e2el": ("E2EL", "End-to-end Latency"),
    "client_queue_time": ("Client Queue Time", "Client-side Queueing"),
    "e2el_including_client_queue": (
        "E2EL incl. Client Queue",
        "Queue-inclusive End-to-end Latency",
    ),
}
MODELS_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ServedModel:
    """The server's model card: the name to send, the id for files, its context length."""

    name: str
    root: str
    max_model_len: int | None


def file_prompts(args: argparse.Namespace, tokenizer: Tokenizer) -> list[PromptRequest] | None:
    """The prompts of a ``custom`` or ``sharegpt`` dataset; None for generated ones."""
    if args.dataset_name in GENERATED:
        if args.dataset_path:
            raise BenchError(f"Cannot use '{args.dataset_name}' dataset with --dataset-path.")
        return None
    if not args.dataset_path:
        raise BenchError(f"--dataset-name {args.dataset_name} needs --dataset-path")
    common = {
        "seed": args.seed,
        "shuffle": not args.disable_shuffle,
        "oversample": not args.no_oversample,
    }
    alias = args.output_len_alias
    if args.dataset_name == "custom":
        return custom_prompts(
            args.dataset_path,
            tokenizer,
            args.num_prompts,
            output_len=alias or args.custom_output_len,
            **common,
        )
    return sharegpt_prompts(
        args.dataset_path,
        tokenizer,
        args.num_prompts,
        output_len=alias or args.sharegpt_output_len,
        **common,
    )


async def served_models(
    base: str, api_key: str | None, timeout_s: float, credential: UrlCredential | None = None
) -> list[dict[str, Any]]:
    """The cards of ``GET /v1/models`` (``serve.py:156-183``)."""
    url = f"{base.removesuffix('/v1')}/v1/models"
    headers = authorization_header(credential, api_key)
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session,
            session.get(url, headers=headers) as response,
        ):
            response.raise_for_status()
            raw = bytearray()
            async for chunk in response.content.iter_chunked(64 * 1024):
                raw += chunk
                if len(raw) > MODELS_MAX_BYTES:
                    raise ValueError(f"its answer is over {MODELS_MAX_BYTES:,} bytes")
        data = parse_json(bytes(raw))  # a server's JSON: bounded depth, finite numbers
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise BenchError(f"Failed to fetch models from server at {url}: {exc}") from exc
    models = data.get("data") if isinstance(data, dict) else None
    return [m for m in models or [] if isinstance(m, dict) and "id" in m]


async def find_model(
    base: str, api_key: str | None, asked: str | None, credential: UrlCredential | None = None
) -> ServedModel:
    """The model to load: the one asked for (its card if listed), else the server's first."""
    try:
        cards = await served_models(base, api_key, MODELS_TIMEOUT_S, credential)
    except BenchError:
        if asked is None:
            raise
        cards = []  # the run itself will say what is wrong with the server
    if asked is None and not cards:
        raise BenchError(f"No models found on the server at {base}.")
    card = next((c for c in cards if asked is None or c["id"] == asked), None)
    if card is None:
        assert asked is not None
        return ServedModel(asked, asked, None)
    mml = card.get("max_model_len")
    return ServedModel(
        str(card["id"]) if asked is None else asked,
        str(card.get("root") or card["id"]) if asked is None else asked,
        int(mml) if isinstance(mml, int) and mml > 0 else None,
    )


def check_lengths(
    args: argparse.Namespace,
    spec: LoadSpec,
    prompts: list[PromptRequest] | None,
    tokenizer: Tokenizer,
    model: ServedModel,
) -> str | None:
    """Refuse lengths the server cannot serve; a note when outputs will be capped."""
    if model.max_model_len is None:
        return None
    if prompts is None:
        specials = int(tokenizer.num_special_tokens_to_add())
        longest_in, longest_out = longest_prompt(spec, specials), longest_output(spec)
        flags = ("--random-input-len", "--random-output-len")
    else:
        longest_in = max(p.prompt_len for p in prompts)
        longest_out = max(p.expected_output_len for p in prompts)
        flags = ("--dataset-path", "the output length")
    return check_context(
        model.max_model_len,
        prompt_tokens=longest_in,
        output_tokens=longest_out,
        input_flag=flags[0],
        output_flag=flags[1],
    )


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
    """bench serve's result block (``serve.py:1181-1237,1382-1411``)."""
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
    _line(out, "Peak output token throughput (tok/s):", result.max_output_tokens_per_s)
    _line(out, "Peak concurrent requests:", float(result.max_concurrent_requests))
    _line(out, "Total token throughput (tok/s):", result.total_token_throughput)
    for metric in percentile_metrics:
        if f"mean_{metric}_ms" not in result.stats:
            continue  # a queue metric without a concurrency cap: bench serve skips it too
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
    cpu = "-" if progress.client_cpu_pct is None else f"{progress.client_cpu_pct:.0f}%"
    text = (
        f"[{progress.elapsed:5.0f}{limit}s] done {progress.done}{total} "
        f"failed {progress.failed} in flight {progress.in_flight} | "
        f"{progress.output_tokens_per_s:,.0f} tok/s | "
        f"TTFT p50 {ms(progress.ttft_p50_ms)} p99 {ms(progress.ttft_p99_ms)} ms | "
        f"ITL p50 {ms(progress.itl_p50_ms)} p99 {ms(progress.itl_p99_ms)} ms | "
        f"client lag {ms(progress.loop_lag_mean_ms)} ms cpu {cpu}"
    )
    return text + (" CLIENT-BOUND" if progress.client_bound else "")


@dataclass(frozen=True)
class _Options:
    """The parsed statistics options."""

    percentiles: list[float]
    metrics: list[str]
    goodput: dict[str, float]


def _options(args: argparse.Namespace) -> _Options:
    try:
        return _Options(
            validate_percentiles(
                float(p) for p in str(args.metric_percentiles).split(",") if p.strip()
            ),
            validate_percentile_metrics(
                m.strip() for m in str(args.percentile_metrics).split(",") if m.strip()
            ),
            parse_goodput(args.goodput) if args.goodput else {},
        )
    except ValueError as exc:
        raise BenchError(str(exc)) from None


def _planned_path(args: argparse.Namespace, model: ServedModel, spec: LoadSpec) -> Path | None:
    if not (args.save_result or args.save_detailed or args.result_filename):
        return None
    return result_path(
        result_dir=args.result_dir,
        result_filename=args.result_filename,
        label=args.label,
        backend=args.backend,
        request_rate=spec.request_rate,
        max_concurrency=spec.max_concurrency,
        model_id=model.root,
        now=datetime.now(),
    )


def _shown(text: str, limit: int = 200) -> str:
    """``text`` from outside as one printed field: at most ``limit`` characters."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def run_async(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The bench run itself; see :func:`run_bench`."""
    options = _options(args)
    spec = build_spec(args)
    # user:password out of the URL: sent as Basic, never printed or written to a result.
    base, credential = split_url(base_url(args))
    api_key = resolve_api_key(None)
    model = await find_model(base, api_key, args.model, credential)
    if args.model is None:
        # ids from the server, shown at most 200 characters each (a 1 MiB id is no line)
        name, root = _shown(model.name), _shown(model.root)
        out.write(f"First model name: {name}, first model id: {root}\n")
    collect_text = bool(args.save_detailed)
    tokenizer, tokenizer_name = load_tokenizer(model.root, args.tokenizer)
    prompts = file_prompts(args, tokenizer)
    if note := check_lengths(args, spec, prompts, tokenizer, model):
        err.write(note + "\n")
    planned = _planned_path(args, model, spec)
    if planned is not None:
        check_writable(planned)
    _describe(args, spec, tokenizer, tokenizer_name, out)
    runner = LoadRunner(
        transport=args.transport,
        credential=credential,
        tokenizer=tokenizer,
        percentiles=options.percentiles,
        percentile_metrics=options.metrics,
        goodput=options.goodput,
        collect_text=collect_text,
        freeze_gc=True,
        client="vtc-bench",
    )
    result, interrupted = await _run_interruptible(runner, spec, base, model, prompts, args, err)
    print_summary(
        result,
        out,
        goodput=bool(options.goodput),
        percentile_metrics=options.metrics,
        percentiles=options.percentiles,
    )
    _report_client(result, err)
    if planned is not None:
        _save(args, result, runner, model, tokenizer, planned, out, err)
    out.flush()
    if interrupted:
        return 130
    return 0 if result.completed else 1


def _describe(
    args: argparse.Namespace, spec: LoadSpec, tokenizer: Tokenizer, name: str, out: TextIO
) -> None:
    if args.dataset_name == "shared-prefix":
        specials = tokenizer.num_special_tokens_to_add()
        total = spec.prefix_len + spec.input_len - specials
        for block in (16, 128):
            hit = expected_hit_pct(spec.prefix_len, total, block, specials)
            out.write(
                f"Shared prefix: {spec.prefix_len} of ~{total + specials} prompt tokens; "
                f"expected prefix-cache hit rate {hit:.1f}% with block size {block}\n"
            )
    out.write(f"Tokenizer: {_shown(name)}\n")
    out.write(f"Traffic request rate: {spec.request_rate}\n")
    out.write(
        f"Burstiness factor: {spec.burstiness} "
        f"({'Poisson process' if spec.burstiness == 1.0 else 'Gamma distribution'})\n"
    )
    out.write(f"Maximum request concurrency: {spec.max_concurrency}\n")
    out.flush()


async def _run_interruptible(
    runner: LoadRunner,
    spec: LoadSpec,
    base: str,
    model: ServedModel,
    prompts: list[PromptRequest] | None,
    args: argparse.Namespace,
    err: TextIO,
) -> tuple[BenchResult, bool]:
    """The run, with Ctrl-C cancelling every stream (the partial result is kept)."""

    def show(progress: LoadProgress) -> None:
        if not args.disable_tqdm:
            err.write(progress_line(progress, spec.duration_s) + "\n")
            err.flush()

    loop = asyncio.get_running_loop()
    interrupted = False

    def interrupt() -> None:
        nonlocal interrupted
        interrupted = True
        runner.cancel_nowait()

    installed = False
    try:
        loop.add_signal_handler(signal.SIGINT, interrupt)
        installed = True
    except (NotImplementedError, RuntimeError):
        pass  # not the main thread, or no signals here: Ctrl-C then ends the process
    try:
        result = await runner.run(
            spec, base_url=base, model=model.name, on_progress=show, prompts=prompts
        )
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)
    return result, interrupted


def _save(
    args: argparse.Namespace,
    result: BenchResult,
    runner: LoadRunner,
    model: ServedModel,
    tokenizer: Tokenizer,
    planned: Path,
    out: TextIO,
    err: TextIO,
) -> None:
    from tui.store.history import default_data_dir  # the CLI's data folder, for the fallback

    now = datetime.now()
    path = result_path(
        result_dir=args.result_dir,
        result_filename=args.result_filename,
        label=args.label,
        backend=args.backend,
        request_rate=float(args.request_rate),
        max_concurrency=result.max_concurrency,
        model_id=model.root,
        now=now,
    )
    data = result_json(
        result,
        runner.last_records,
        backend=args.backend,
        label=args.label,
        model_id=model.root,
        tokenizer_id=args.tokenizer or model.root,
        num_prompts=result.num_prompts if args.duration_s else args.num_prompts,
        burstiness=float(args.burstiness),
        metadata=args.metadata or [],
        detailed=bool(args.save_detailed),
        now=now,
        count_tokens=getattr(tokenizer, "count", None),
    )
    where, why = save(data, path, default_data_dir() / "bench")
    if why is not None:
        err.write(f"vtc: could not write {why}; the result is saved to {where} instead\n")
    out.write(f"Result saved to {where}\n")


def _report_client(result: BenchResult, err: TextIO) -> None:
    """Failed requests' errors and the client's own health, to stderr."""
    if result.errors:
        err.write(f"{result.failed} failed request(s); first errors:\n")
        for text in dict.fromkeys(result.errors[:10]):
            err.write(f"  {text}\n")
    client_input = result.client_input_tokens
    if client_input is not None and result.total_input_tokens:
        off = 100.0 * (client_input - result.total_input_tokens) / result.total_input_tokens
        if abs(off) >= 5.0:
            hint = (
                "point --tokenizer at the model's folder (tokenizer.json)"
                if result.prompt_tokenizer == APPROX_NAME
                else "the server tokenizes differently from that tokenizer.json"
            )
            err.write(
                f"note: the client counted {client_input} input tokens, the server "
                f"{result.total_input_tokens} ({off:+.1f}%): prompts were sized with "
                f"{result.prompt_tokenizer}; {hint}\n"
            )
    if result.duration > 0 and result.client_bound_s >= 0.2 * result.duration:
        err.write(
            f"warning: the client was the bottleneck for {result.client_bound_s:.0f} s of "
            f"{result.duration:.0f} s (event loop late by up to "
            f"{result.client_max_loop_lag_ms:.0f} ms): latencies include "
            "the client's own delay; lower --max-concurrency or run the client on a freer core\n"
        )
    err.flush()


def run_bench(args: argparse.Namespace) -> int:
    """Run ``vtc bench`` for parsed ``args``; the exit code.

    0 when at least one request completed; 1 when none did; 2 when the run could not
    start (one line on stderr: ``vtc: ...``); 130 after Ctrl-C (partial result printed
    and saved).
    """
    try:
        return asyncio.run(run_async(args, sys.stdout, sys.stderr))
    except VtcError as exc:
        sys.stderr.write(f"vtc: {exc.one_line()}\n")
        return 2


def main(argv: list[str] | None = None) -> int:
    """``python -m tui.app.bench``: the same as ``vtc bench``."""
    parser = OneLineParser(prog=PROG, description=__doc__.splitlines()[0])
    add_bench_arguments(parser)
    return run_bench(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
