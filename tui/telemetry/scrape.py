"""Fetching a Prometheus text page over HTTP and parsing it, with failures turned into reasons.

Shared by the vLLM /metrics source, the DCGM-exporter source and ``vtc top``. Parsing is
prometheus_client's own parser (``text_string_to_metric_families``); nothing here
re-implements the format.

Every scrape is bounded, whatever the endpoint does:

- **time**: one deadline for the whole request (connect, headers, body), not per read: a
  server that sends its headers and then one byte a second fails at the deadline;
- **size**: the body is read in chunks and abandoned past ``MAX_PAGE_BYTES`` (4 MiB;
  vLLM 0.32's page is about 60 KB, a dcgm-exporter page for 8 GPUs about 200 KB); a
  ``Content-Length`` above the cap is refused before reading;
- **the caller's loop**: parsing (and the caller's reduction of the families) runs in a
  worker thread (``fetch_page`` + ``asyncio.to_thread``), so a large page never blocks it;
- **the message**: every reason is one line of at most ``MAX_REASON_CHARS`` characters.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import urlsplit

import httpx
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from tui.domain.errors import VtcError

MAX_PAGE_BYTES = 4 * 1024 * 1024
MAX_REASON_CHARS = 160
DEFAULT_DEADLINE_S = 3.0

T = TypeVar("T")


class ScrapeError(VtcError):
    """A page could not be fetched or parsed; ``str()`` is a reason fit to show the operator."""

    def __init__(self, reason: str) -> None:
        super().__init__(one_line(reason))


def one_line(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """``text`` as one line of at most ``limit`` characters (an ellipsis marks a cut)."""
    # Only the head is looked at: a reason may quote a 50 MB page.
    head = " ".join(text[: limit * 4].split())
    return head if len(head) <= limit else head[: limit - 1].rstrip() + "…"


def check_metrics_url(url: str) -> str:
    """Return ``url`` if it is an absolute http(s) URL, else raise ``ValueError`` saying why."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(
            f"metrics URL must be an absolute http:// or https:// URL, got {one_line(url)!r} "
            "(for example http://127.0.0.1:8000/metrics)"
        )
    return url


def parse_families(text: str) -> list[Metric]:
    """Parse a Prometheus text page into metric families; ``ScrapeError`` if it is malformed.

    Note prometheus_client's parser strips ``_total`` from *counter family* names while the
    *sample* names keep it (``vllm:prompt_tokens`` family, ``vllm:prompt_tokens_total``
    sample); callers here match on sample names.
    """
    try:
        # The parser is a generator: errors surface while iterating, so materialise here.
        families = list(text_string_to_metric_families(text))
    except Exception as exc:
        # Any exception from the third-party parser fed an untrusted page means the page is
        # malformed (ValueError mostly; IndexError/TypeError on some truncated lines).
        raise ScrapeError(f"malformed metrics page: {type(exc).__name__}: {exc}") from exc
    for family in families:
        family.samples = [s for s in family.samples if _plausible(s.value)]
    return families


MAX_SAMPLE = float(2**63)
"""The largest sample value taken from a page (a counter of 2^63 is no server's yet)."""


def _plausible(value: object) -> bool:
    """Whether a sample's value is a number any reader may use: finite, 0 or more, within
    :data:`MAX_SAMPLE`. The parser hands back a 400-digit integer as an ``int`` (no float
    holds it: ``math.isfinite`` raises), ``NaN``/``+Inf`` and negatives as they are; every
    gauge, counter and bucket vLLM and DCGM export is none of these, so such a sample is
    dropped here, once, and the metric reads as not reported."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        number = float(value)
    except OverflowError:
        return False
    return 0.0 <= number <= MAX_SAMPLE  # False for nan


def _page(url: str) -> str:
    """What the page at ``url`` is, for a message (the same reader fetches /version)."""
    return "metrics page" if url.rstrip("/").endswith("/metrics") else "page"


async def _read_capped(response: httpx.Response, url: str, max_bytes: int) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise ScrapeError(
            f"{_page(url)} at {url} is {int(declared) / 2**20:.1f} MiB, over the "
            f"{max_bytes / 2**20:g} MiB limit"
        )
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():  # decoded: the cap holds for gzip bodies too
        size += len(chunk)
        if size > max_bytes:
            raise ScrapeError(
                f"{_page(url)} at {url} is over the {max_bytes / 2**20:g} MiB limit; "
                "stopped reading"
            )
        chunks.append(chunk)
    return b"".join(chunks)


async def fetch_page(
    client: httpx.AsyncClient,
    url: str,
    deadline_s: float = DEFAULT_DEADLINE_S,
    max_bytes: int = MAX_PAGE_BYTES,
) -> str:
    """GET ``url`` within ``deadline_s`` (the whole request) and at most ``max_bytes``.

    Every failure is a ``ScrapeError`` with a one-line reason.
    """
    try:
        async with asyncio.timeout(deadline_s):
            # The client's own timeout is per operation; the deadline above bounds the sum.
            async with client.stream("GET", url, timeout=deadline_s) as response:
                if response.status_code != 200:
                    raise ScrapeError(f"HTTP {response.status_code} from {url}")
                body = await _read_capped(response, url, max_bytes)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise ScrapeError(f"timed out after {deadline_s:g} s reading {url} (whole page)") from exc
    except httpx.ConnectError as exc:
        raise ScrapeError(f"cannot connect to {url}: {_reason(exc)}") from exc
    except httpx.HTTPError as exc:
        raise ScrapeError(f"request to {url} failed: {_reason(exc)}") from exc
    except OSError as exc:  # transports may surface raw socket errors
        raise ScrapeError(f"request to {url} failed: {_reason(exc)}") from exc
    # Prometheus' text format is UTF-8; a stray byte must not fail the whole page.
    return body.decode("utf-8", errors="replace")


async def scrape(
    client: httpx.AsyncClient,
    url: str,
    reduce: Callable[[list[Metric], float], T],
    *,
    deadline_s: float = DEFAULT_DEADLINE_S,
    max_bytes: int = MAX_PAGE_BYTES,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Fetch ``url``, then parse it and hand its families to ``reduce`` in a worker thread.

    ``reduce(families, t)`` gets the time the page arrived (``clock()``); it must be pure (it
    runs in a thread). ``ScrapeError`` on any failure, the parser's included.
    """
    text = await fetch_page(client, url, deadline_s, max_bytes)
    t = clock()
    return await asyncio.to_thread(lambda: reduce(parse_families(text), t))


def _reason(exc: BaseException) -> str:
    text = one_line(str(exc))
    return text or type(exc).__name__
