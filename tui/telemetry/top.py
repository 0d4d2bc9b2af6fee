"""``vtc top URL [--once] [--json] [--interval S]``: a server's telemetry, headless.

The same sources and pure functions as the console's panels: the /metrics source
(bounded scrapes, 60 s latency window), the GPU (``--gpu-metrics-url``, else the page's
own DCGM gauges, else this machine's NVML for a server on loopback, else "remote GPU not
visible"), freshness, history and advice. Polling runs on ``tui.telemetry.poller.Poller``
while reports are made on their own tick, so a scrape that hangs shows as ``stale`` after
two intervals and ``down`` at its deadline, as on the console.

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
from urllib.parse import urlsplit, urlunsplit

import httpx

from tui.domain.advice import AdviceInputs, advise
from tui.domain.errors import VtcError
from tui.domain.gpus import gpu_for_attached, server_gpu_indices
from tui.domain.history import TelemetryHistory
from tui.domain.quantiles import latency_of
from tui.domain.telemetry import GpuSample, ServerLatency, ServerMetrics, SourceStatus
from tui.domain.url_credentials import authorization_header, split_url
from tui.telemetry.dcgm import DcgmGpuSource
from tui.telemetry.locality import is_local_url
from tui.telemetry.nvml import NvmlGpuSource
from tui.telemetry.poller import Poller
from tui.telemetry.scrape import check_metrics_url, one_line
from tui.telemetry.top_report import TopReport, build_report, text_line
from tui.telemetry.vllm_metrics import VllmMetricsSource

DEFAULT_INTERVAL_S = 1.0
DEFAULT_DEADLINE_S = 10.0
ADVICE_WINDOW_S = 60.0


def metrics_url(url: str) -> str:
    """``url`` itself when it names a path, else its ``/metrics``; ``VtcError`` if not http(s)."""
    parts = urlsplit(url.strip())
    if parts.path in ("", "/"):
        parts = parts._replace(path="/metrics")
    try:
        return check_metrics_url(urlunsplit(parts))
    except ValueError as exc:
        raise VtcError(str(exc)) from exc


class TopWatcher:
    """Polls one server's /metrics (and its GPU) and makes reports on demand.

    ``scrape_deadline_s`` bounds each scrape; ``local_gpu``: read this machine's NVML
    (``None``: when the URL is a loopback one).
    """

    def __init__(
        self,
        url: str,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        scrape_deadline_s: float = 3.0,
        gpu_metrics_url: str | None = None,
        window_s: float | None = 60.0,
        local_gpu: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # A user:password in either URL is taken out and sent as Basic to that URL only.
        clean, credential = split_url(url)
        self.url = metrics_url(clean)
        self.interval_s = interval_s
        self._clock = clock
        self._client = httpx.AsyncClient(
            trust_env=False, headers=authorization_header(credential)
        )
        gpu_url, gpu_credential = split_url(gpu_metrics_url or "")
        self._gpu_client = (
            httpx.AsyncClient(trust_env=False, headers=authorization_header(gpu_credential))
            if gpu_url
            else None
        )
        self._metrics = VllmMetricsSource(
            self.url,
            self._client,
            timeout_s=scrape_deadline_s,
            window_s=window_s or 60.0,
            clock=clock,
        )
        self._dcgm = (
            DcgmGpuSource(gpu_url, self._gpu_client, timeout_s=scrape_deadline_s, clock=clock)
            if self._gpu_client is not None
            else None
        )
        use_local = is_local_url(self.url) if local_gpu is None else local_gpu
        self._nvml = NvmlGpuSource(clock=clock) if use_local and self._dcgm is None else None
        self.window_s = window_s
        self.history = TelemetryHistory()
        self.latest: ServerMetrics | None = None
        self.good: ServerMetrics | None = None
        self._gpu_reading: GpuSample | None = None  # the DCGM URL's or this machine's NVML
        self.rounds = 0
        self._changed = asyncio.Event()
        self._pollers: list[Poller[Any]] = []

    def _on_metrics(self, sample: ServerMetrics) -> None:
        self.rounds += 1
        self.latest = sample
        if sample.status is SourceStatus.OK and not sample.message:
            self.good = sample
        self.history.record_metrics(sample)
        self._changed.set()

    def _on_gpu(self, sample: GpuSample) -> None:
        self._gpu_reading = sample

    def gpu(self, now: float) -> GpuSample | None:
        """The GPU reading to show: the DCGM URL's, else as ``gpu_for_attached`` picks."""
        if self._dcgm is not None:
            return self._gpu_reading
        if self.latest is None:
            return self._gpu_reading  # this machine's, while the page has not answered
        return gpu_for_attached(self.latest, now, local=self._gpu_reading)

    def start(self) -> None:
        """Start polling (needs a running event loop)."""
        self._pollers = [
            Poller(self._metrics.sample, self._on_metrics, interval=self.interval_s, name="top")
        ]
        gpu_source: Callable[[], Any] | None = None
        if self._dcgm is not None:
            gpu_source = self._dcgm.sample
        elif self._nvml is not None:
            gpu_source = self._nvml.sample  # synchronous: the poller runs it in a thread
        if gpu_source is not None:
            self._pollers.append(
                Poller(gpu_source, self._on_gpu, interval=self.interval_s, name="top-gpu")
            )
        for poller in self._pollers:
            poller.start()

    async def wait_for_readings(self, count: int) -> None:
        """Until ``count`` /metrics rounds ended, or one ended down."""
        while self.rounds < count:
            if self.latest is not None and self.latest.status is not SourceStatus.OK:
                return
            self._changed.clear()
            await self._changed.wait()

    async def stop(self) -> None:
        """Stop polling and close what was opened."""
        for poller in self._pollers:
            await poller.stop()
        await self._client.aclose()
        if self._gpu_client is not None:
            await self._gpu_client.aclose()
        if self._nvml is not None:
            self._nvml.close()

    def latency(self) -> ServerLatency | None:
        """The window's quantiles, or the lifetime's for an unbounded report."""
        if self.good is None:
            return None
        if self.window_s is None:
            return latency_of(self.good.histograms, None)
        return self.good.latency

    def report(self, *, no_answer: str = "") -> TopReport:
        """The report now."""
        now = self._clock()
        recent = self.history.recent_metrics(now - ADVICE_WINDOW_S)
        gpu = self.gpu(now)
        indices = server_gpu_indices(gpu.devices) if gpu is not None else frozenset()
        advice = advise(AdviceInputs(recent, gpu=gpu, server_gpus=indices))
        return build_report(
            self.url,
            latest=self.latest,
            good=self.good,
            latency=self.latency(),
            gpu=gpu,
            now=now,
            interval_s=self.interval_s,
            advice=advice,
            no_answer=no_answer,
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
    watcher = TopWatcher(
        url,
        interval_s=interval_s,
        scrape_deadline_s=scrape_deadline,
        gpu_metrics_url=gpu_metrics_url,
        window_s=None,
    )
    started = time.monotonic()
    watcher.start()
    try:
        async with asyncio.timeout(max(0.5, deadline_s - 0.5)):
            await watcher.wait_for_readings(2)
    except TimeoutError:
        pass
    elapsed = time.monotonic() - started
    try:
        report = watcher.report(
            no_answer=f"no complete answer from {watcher.url} in {elapsed:.0f} s"
        )
        if on_report is not None:
            on_report(report)
        return report
    finally:
        await watcher.stop()  # cancels a scrape in flight


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
    watcher = TopWatcher(url, interval_s=interval_s, gpu_metrics_url=gpu_metrics_url)
    watcher.start()
    try:
        printed = 0
        while count is None or printed < count:
            await asyncio.sleep(interval_s)
            report = watcher.report()
            print(json.dumps(report.to_json_dict()) if as_json else text_line(report), file=out)
            out.flush()
            printed += 1
    finally:
        await watcher.stop()


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
        return 0 if report.state == "ok" else 1
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
