"""``vtc top URL [--once] [--json] [--interval S]``: a server's telemetry, headless.

Assembled here: the watcher (``tui.telemetry.top.TopWatcher``) over the GPU reader the one
adapter builder chooses (``tui.modes.adapters.gpu_source``, as attach mode's), reports
printed as text or JSON.

``--once`` reports after two readings an interval apart (rates need two) or the first
failure, within ``--deadline`` (10 s) whatever the endpoint does; its latency quantiles
are over the server's lifetime (``latency_window_s`` null). Exit status: 0 when ``ok``,
1 when ``stale`` or ``down``, 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from tui.domain.errors import VtcError
from tui.domain.telemetry import SourceStatus
from tui.domain.url_credentials import split_url
from tui.modes.adapters import gpu_source
from tui.telemetry.scrape import check_metrics_url, one_line
from tui.telemetry.top import DEFAULT_DEADLINE_S, DEFAULT_INTERVAL_S, TopWatcher, metrics_url
from tui.telemetry.top_report import TopReport, text_line


def watcher(
    url: str,
    *,
    interval_s: float,
    gpu_metrics_url: str | None,
    scrape_deadline_s: float = 3.0,
    window_s: float | None = 60.0,
) -> TopWatcher:
    """A watcher of ``url`` with the GPU source attach mode would pick for it."""
    # The watcher takes a user:password out of ``url`` (sent as Basic); where it points
    # decides the GPU source, so that is judged on the clean URL.
    target = metrics_url(split_url(url)[0])
    choice = gpu_source(
        metrics_url=gpu_metrics_url, attached_url=target, scrape_timeout_s=scrape_deadline_s
    )
    return TopWatcher(
        url,
        interval_s=interval_s,
        scrape_deadline_s=scrape_deadline_s,
        gpu=choice.reader,
        page_first=choice.policy.page_first,
        window_s=window_s,
    )


async def top_once(
    url: str,
    *,
    interval_s: float = DEFAULT_INTERVAL_S,
    deadline_s: float = DEFAULT_DEADLINE_S,
    gpu_metrics_url: str | None = None,
    on_report: Callable[[TopReport], object] | None = None,
) -> TopReport:
    """One report within ``deadline_s``: after two readings ``interval_s`` apart, the first
    failure, or the deadline, whichever comes first.

    ``on_report`` gets the report before the watcher is stopped: stopping may wait for a
    page still being parsed in its thread (bounded by the size cap), the answer does not.
    """
    # Each scrape gets at most a third of the deadline: two scrapes and the interval fit.
    scrape_deadline = max(0.5, min(3.0, (deadline_s - interval_s) / 3))
    top = watcher(
        url,
        interval_s=interval_s,
        gpu_metrics_url=gpu_metrics_url,
        scrape_deadline_s=scrape_deadline,
        window_s=None,
    )
    started = time.monotonic()
    top.start()
    try:
        async with asyncio.timeout(max(0.5, deadline_s - 0.5)):
            await top.wait_for_readings(2)
    except TimeoutError:
        pass
    elapsed = time.monotonic() - started
    try:
        report = top.report(no_answer=f"no complete answer from {top.url} in {elapsed:.0f} s")
        if on_report is not None:
            on_report(report)
        return report
    finally:
        await top.stop()  # cancels a scrape in flight


async def top_watch(
    url: str,
    *,
    interval_s: float,
    as_json: bool,
    gpu_metrics_url: str | None,
    out: TextIO,
    count: int | None = None,
) -> None:
    """A report every ``interval_s`` (``count`` of them, or until cancelled)."""
    top = watcher(url, interval_s=interval_s, gpu_metrics_url=gpu_metrics_url)
    top.start()
    try:
        printed = 0
        while count is None or printed < count:
            await asyncio.sleep(interval_s)
            report = top.report()
            print(json.dumps(report.to_json_dict()) if as_json else text_line(report), file=out)
            out.flush()
            printed += 1
    finally:
        await top.stop()


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {one_line(text)!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``vtc top`` on the ``vtc`` subcommand parser."""
    top = sub.add_parser(
        "top",
        help="a server's live telemetry, headless (state, latency percentiles, KV, GPUs)",
        description="Watch a vLLM server's /metrics (and GPU) like the console's panels do.",
    )
    top.add_argument("url", help="the server, e.g. http://127.0.0.1:8000 (or its /metrics URL)")
    top.add_argument("--once", action="store_true", help="print one report and exit")
    top.add_argument("--json", action="store_true", help="JSON (one object per report)")
    top.add_argument(
        "--interval", type=_positive, default=DEFAULT_INTERVAL_S, help="seconds between readings"
    )
    top.add_argument(
        "--deadline",
        type=_positive,
        default=DEFAULT_DEADLINE_S,
        help="--once: answer within this many seconds whatever the endpoint does (default 10)",
    )
    top.add_argument(
        "--gpu-metrics-url", metavar="URL", help="read the GPUs from a dcgm-exporter at URL"
    )
    return top


def run(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    """Run ``vtc top`` from parsed arguments; the exit status."""
    try:
        metrics_url(split_url(args.url)[0])  # checked here; the watcher takes out user:password
        if args.gpu_metrics_url:
            check_metrics_url(split_url(args.gpu_metrics_url)[0])
        url = args.url
    except (VtcError, ValueError) as exc:
        print(f"vtc: {one_line(str(exc), 300)}", file=sys.stderr)
        return 2
    if args.once:

        def emit(report: TopReport) -> None:
            text = json.dumps(report.to_json_dict(), indent=2) if args.json else text_line(report)
            print(text, file=out, flush=True)

        report = asyncio.run(
            top_once(
                url,
                interval_s=args.interval,
                deadline_s=args.deadline,
                gpu_metrics_url=args.gpu_metrics_url,
                on_report=emit,
            )
        )
        return 0 if report.state is SourceStatus.OK else 1
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a watch ends
        asyncio.run(
            top_watch(
                url,
                interval_s=args.interval,
                as_json=args.json,
                gpu_metrics_url=args.gpu_metrics_url,
                out=out,
            )
        )
    return 0
