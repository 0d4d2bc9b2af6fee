"""Fetching a Prometheus text page over HTTP and parsing it, with failures turned into reasons.

Shared by the vLLM /metrics source and the DCGM-exporter source. Parsing is prometheus_client's
own parser (``text_string_to_metric_families``); nothing here re-implements the format.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families


class ScrapeError(Exception):
    """A page could not be fetched or parsed; ``str()`` is a reason fit to show the operator."""


def check_metrics_url(url: str) -> str:
    """Return ``url`` if it is an absolute http(s) URL, else raise ``ValueError`` saying why."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(
            f"metrics URL must be an absolute http:// or https:// URL, got {url!r} "
            "(for example http://127.0.0.1:8000/metrics)"
        )
    return url


def parse_families(text: str) -> list[Metric]:
    """Parse a Prometheus text page into metric families; ``ScrapeError`` if it is malformed.

    Note prometheus_client's parser strips ``_total`` from *counter family* names while the
    *sample* names keep it (``vllm:prompt_tokens`` family, ``vllm:prompt_tokens_total`` sample);
    callers here match on sample names.
    """
    try:
        # The parser is a generator: errors surface while iterating, so materialise here.
        return list(text_string_to_metric_families(text))
    except ValueError as exc:
        raise ScrapeError(f"malformed metrics page: {exc}") from exc


async def fetch_families(client: httpx.AsyncClient, url: str, timeout_s: float) -> list[Metric]:
    """GET ``url`` and parse it; every failure becomes a ``ScrapeError`` with a short reason."""
    try:
        response = await client.get(url, timeout=timeout_s)
    except httpx.TimeoutException as exc:
        raise ScrapeError(f"timed out after {timeout_s:g} s reading {url}") from exc
    except httpx.ConnectError as exc:
        raise ScrapeError(f"cannot connect to {url}: {_reason(exc)}") from exc
    except httpx.HTTPError as exc:
        raise ScrapeError(f"request to {url} failed: {_reason(exc)}") from exc
    except OSError as exc:  # transports may surface raw socket errors
        raise ScrapeError(f"request to {url} failed: {_reason(exc)}") from exc
    if response.status_code != 200:
        raise ScrapeError(f"HTTP {response.status_code} from {url}")
    return parse_families(response.text)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__
