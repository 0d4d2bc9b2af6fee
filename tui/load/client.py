"""A streaming OpenAI client that measures requests the way ``vllm bench serve`` does.

Measurement mirrors ``benchmarks/lib/endpoint_request_func.py`` (reference section 4.1):

- ``st = time.perf_counter()`` is taken right before the POST and kept as
  ``start_time`` (``:228-230``);
- TTFT is the arrival of the first SSE data message whose ``choices`` is non-empty
  (its text may be empty), minus ``st`` (``:258-266,433-438``);
- each later ``choices`` message adds one ITL, the gap since the previous one
  (``:268-272,440-447``): these are *chunk* gaps;
- latency is the last ``choices`` message minus ``st``; the usage chunk and ``[DONE]``
  are excluded (``:287,462``);
- ``usage.completion_tokens`` is the output length and ``usage.prompt_tokens``
  overwrites the prompt length (``:274-277,448-451``);
- success needs HTTP 200 *and* one ``choices`` message at least, else
  ``Never received a valid chunk to calculate TTFT.This response will be marked as
  failed!`` (``:278-285``).

Where bench serve stamps a read when its task resumes after aiohttp handed it the bytes,
vtc stamps them where they arrive; and where bench serve opens each connection inside
its first request (so the first ``max_concurrency`` TTFTs include a TCP, or TLS, handshake),
vtc's own transport opens them before the clock starts
(:meth:`OpenAIStreamClient.preconnect`). The HTTP library sits behind :class:`Transport`, whose
default implementation is vtc's own (:mod:`tui.load.wire`: asyncio protocols that take the
timestamp first and leave parsing and accounting for later,
:class:`~tui.load.account.StreamRecorder`). aiohttp, bench serve's library, is the other
implementation: it is used when a proxy applies to the server's URL (aiohttp honours the
``*_PROXY`` variables) or when asked for (``--transport aiohttp``), and shows the
difference in ``benchmarks/loadgen.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import aiohttp

from tui.domain.url_credentials import UrlCredential, authorization_header
from tui.domain.workload import Endpoint
from tui.load.account import NO_VALID_CHUNK, StreamRecorder
from tui.load.errors import LoadError
from tui.load.prompts import PromptRequest
from tui.load.stats import RequestRecord
from tui.load.wire import (
    ERROR_BODY_EXCERPT,
    BodyEnd,
    BodyFeed,
    ConnectionPool,
    HttpTarget,
    Response,
    StaleConnection,
)

__all__ = [
    "API_KEY_ENV",
    "NO_VALID_CHUNK",
    "AiohttpTransport",
    "NativeTransport",
    "OpenAIStreamClient",
    "PreparedRequest",
    "Transport",
    "TransportFactory",
    "TransportKind",
    "api_url",
    "make_transport",
    "resolve_api_key",
]

API_KEY_ENV = "OPENAI_API_KEY"

#: ``auto``: vtc's own transport unless a proxy applies to the URL, then aiohttp.
TransportKind = Literal["auto", "native", "aiohttp"]
TRANSPORT_KINDS: tuple[str, ...] = ("auto", "native", "aiohttp")


@dataclass(frozen=True)
class PreparedRequest:
    """A POST ready to go: the URL, the JSON body's bytes and the headers."""

    url: str
    body: bytes
    headers: dict[str, str]


class Transport(Protocol):
    """A pooled HTTP client that POSTs and hands the response body over as it arrives."""

    async def post(self, request: PreparedRequest, feed: BodyFeed, end: BodyEnd) -> Response:
        """Send ``request``; a 200's body goes to ``feed(timestamp, bytes)`` read by read,
        then ``end(timestamp)``. Returns the status (and a non-200's body excerpt).

        Cancellation closes the connection, so the server sees the client go away.
        """
        ...

    async def preconnect(self, url: str, count: int) -> None:
        """Open ``count`` kept-alive connections to ``url`` ahead (best effort)."""
        ...

    async def aclose(self) -> None:
        """Close every pooled connection."""
        ...


#: Builds a transport for ``(max_connections or None for unlimited, timeout_s)``.
TransportFactory = Callable[[int | None, float], Transport]


class NativeTransport:
    """vtc's own HTTP/1.1 client (:mod:`tui.load.wire`): one pool per host."""

    def __init__(self) -> None:
        self._pools: dict[tuple[str, int, bool], ConnectionPool] = {}
        self._heads: dict[str, tuple[ConnectionPool, bytes]] = {}

    def _route(self, url: str) -> tuple[ConnectionPool, bytes]:
        known = self._heads.get(url)
        if known is not None:
            return known
        target = HttpTarget.from_url(url)
        key = (target.host, target.port, target.tls)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = ConnectionPool(target)
        start = f"POST {target.path} HTTP/1.1\r\nHost: {target.host_header}\r\n"
        route = self._heads[url] = (pool, start.encode("latin-1"))
        return route

    async def post(self, request: PreparedRequest, feed: BodyFeed, end: BodyEnd) -> Response:
        """POST on a kept-alive connection (a stale one is retried once on a new one)."""
        pool, start = self._route(request.url)
        lines = "".join(f"{name}: {value}\r\n" for name, value in request.headers.items())
        raw = b"%s%sContent-Length: %d\r\n\r\n%s" % (
            start,
            lines.encode("latin-1"),
            len(request.body),
            request.body,
        )
        conn = await pool.acquire()
        for retry in (False, True):
            exchange = pool.exchange(conn, feed, end)
            conn.start(raw, exchange)
            try:
                return await exchange.done
            except StaleConnection:
                pool.discard(conn)
                if retry:
                    raise
            except BaseException:
                pool.discard(conn)  # cancel, timeout, failure: never reuse the line
                raise
            conn = await pool.connect()
        raise AssertionError("unreachable")

    async def preconnect(self, url: str, count: int) -> None:
        """Open ``count`` connections ahead, so no TTFT includes a TCP (or TLS) handshake."""
        pool, _ = self._route(url)
        await pool.fill(count)

    async def aclose(self) -> None:
        """Abort every connection."""
        for pool in self._pools.values():
            await pool.aclose()
        self._pools.clear()
        self._heads.clear()


class AiohttpTransport:
    """aiohttp.ClientSession with a connector capped at the concurrency, as bench serve.

    Honours ``*_PROXY`` (``trust_env``). Must be constructed inside a running event loop.
    """

    def __init__(
        self, max_connections: int | None, timeout_s: float, *, trust_env: bool = True
    ) -> None:
        # Mirrors serve.py:826-835 (connector limit = max_concurrency or 0 = unlimited).
        connector = aiohttp.TCPConnector(
            limit=max_connections or 0,
            limit_per_host=max_connections or 0,
            keepalive_timeout=60,
            force_close=False,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            trust_env=trust_env,
            # Only the connect phase gets aiohttp's timer: a sock_read timeout re-arms a
            # timer on every read, and the client's own per-request timeout covers reads.
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout_s),
        )

    async def post(self, request: PreparedRequest, feed: BodyFeed, end: BodyEnd) -> Response:
        """POST and stream; releasing an unfinished response closes its connection."""
        clock = time.perf_counter
        async with self._session.post(
            request.url, data=request.body, headers=request.headers
        ) as response:
            if response.status != 200:
                data = await response.content.read(ERROR_BODY_EXCERPT)
                return Response(
                    response.status,
                    response.reason or "",
                    data.decode("utf-8", errors="replace"),
                )
            read = response.content.readany
            while data := await read():
                feed(clock(), data)  # stamped when this task resumes with the bytes
            end(clock())
            return Response(response.status, response.reason or "")

    async def preconnect(self, url: str, count: int) -> None:
        """Nothing: aiohttp opens each connection on its first request, as in bench serve."""
        return None

    async def aclose(self) -> None:
        """Close the session and its connector."""
        await self._session.close()


def proxied(url: str) -> bool:
    """Whether a ``*_PROXY`` variable applies to ``url`` (then aiohttp must carry it)."""
    target = HttpTarget.from_url(url)
    proxies = urllib.request.getproxies()
    if not proxies.get("https" if target.tls else "http"):
        return False
    return not urllib.request.proxy_bypass(target.host)


def make_transport(
    kind: TransportKind, max_connections: int | None, timeout_s: float, url: str = ""
) -> Transport:
    """A transport by name (see :data:`TransportKind`); ``url`` decides ``auto``."""
    if kind == "auto":
        kind = "aiohttp" if url and proxied(url) else "native"
    if kind == "native":
        return NativeTransport()
    if kind == "aiohttp":
        return AiohttpTransport(max_connections, timeout_s)
    raise ValueError(f"unknown transport {kind!r}: expected one of {', '.join(TRANSPORT_KINDS)}")


def resolve_api_key(api_key: str | None) -> str | None:
    """The key given, else ``$OPENAI_API_KEY``, else None (bench serve: ``:149-156``)."""
    if api_key:
        return api_key
    return os.environ.get(API_KEY_ENV) or None


def api_url(base_url: str, endpoint: Endpoint) -> str:
    """``base_url`` (with or without a trailing ``/v1``) plus the endpoint path."""
    base = base_url.strip().rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise LoadError(f"base_url must start with http:// or https://, got {base_url!r}")
    HttpTarget.from_url(base)  # a host is required
    base = base.removesuffix("/v1")
    path = "/v1/completions" if endpoint == "completions" else "/v1/chat/completions"
    return base + path


def _header_value(name: str, value: str) -> str:
    if "\r" in value or "\n" in value:
        raise LoadError(f"{name} must not contain line breaks")
    return value


class OpenAIStreamClient:
    """Sends one prompt to ``/v1/completions`` or ``/v1/chat/completions`` and measures it.

    The API key (given, or ``$OPENAI_API_KEY``) is sent as a Bearer header only; it is
    kept out of ``repr`` and of every error text.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        base_url: str,
        model: str,
        endpoint: Endpoint = "completions",
        api_key: str | None = None,
        ignore_eos: bool = False,
        temperature: float | None = None,
        request_timeout_s: float = 600.0,
        request_id_prefix: str = "",
        collect_text: bool = True,
        credential: UrlCredential | None = None,
    ) -> None:
        if request_timeout_s <= 0:
            raise ValueError("request_timeout_s must be > 0")
        self._transport = transport
        self.url = api_url(base_url, endpoint)
        self.model = model
        self.endpoint: Endpoint = endpoint
        self.ignore_eos = ignore_eos
        self.temperature = temperature
        self.request_timeout_s = request_timeout_s
        self.request_id_prefix = _header_value("the request id prefix", request_id_prefix)
        self.collect_text = collect_text
        key = resolve_api_key(api_key)
        self._api_key = _header_value("the API key", key) if key else None
        self._credential = credential  # the base URL's user:password, sent as Basic

    def __repr__(self) -> str:
        return f"OpenAIStreamClient(url={self.url!r}, model={self.model!r})"

    def payload(self, prompt: PromptRequest) -> dict[str, Any]:
        """The JSON body, as bench serve builds it (``:206-218,386-396``).

        ``ignore_eos`` and ``temperature`` are sent only when set; chat uses
        ``max_completion_tokens`` and a text content part, as bench serve does.
        """
        body: dict[str, Any] = {"model": self.model}
        if self.endpoint == "completions":
            body["prompt"] = prompt.prompt
            body["max_tokens"] = prompt.expected_output_len
        else:
            body["messages"] = [
                {"role": "user", "content": [{"type": "text", "text": prompt.prompt}]}
            ]
            body["max_completion_tokens"] = prompt.expected_output_len
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        if self.ignore_eos:
            body["ignore_eos"] = True
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return body

    def headers(self, request_id: str | None = None) -> dict[str, str]:
        """Content type, the Bearer key when there is one, and an ``x-request-id``."""
        headers = {"Content-Type": "application/json", "Accept": "*/*", "User-Agent": "vtc"}
        headers.update(authorization_header(self._credential, self._api_key))
        if request_id is not None:
            headers["x-request-id"] = request_id
        return headers

    async def preconnect(self, count: int) -> None:
        """Open ``count`` connections before the clock starts (see the transport)."""
        if count > 0:
            await self._transport.preconnect(self.url, count)

    def prepare(self, prompt: PromptRequest) -> PreparedRequest:
        """The POST for ``prompt`` (its index makes the ``x-request-id``)."""
        body = json.dumps(self.payload(prompt)).encode()
        return PreparedRequest(
            self.url, body, self.headers(f"{self.request_id_prefix}{prompt.index}")
        )

    async def send(
        self, prompt: PromptRequest, record: RequestRecord | None = None
    ) -> RequestRecord:
        """Send ``prompt`` and fill ``record`` (a new one if None) with its measurement.

        Failures (HTTP errors, transport errors, the per-request timeout) end up in
        ``record.error`` with ``success`` False. Cancellation propagates after closing
        the connection; the record then holds what was measured so far.
        """
        rec = record if record is not None else RequestRecord()
        rec.prompt_len = prompt.prompt_len
        request = self.prepare(prompt)
        rec.start_time = time.perf_counter()
        recorder = StreamRecorder(rec, self.endpoint, self.collect_text)
        try:
            async with asyncio.timeout(self.request_timeout_s):
                response = await self._transport.post(request, recorder.feed, recorder.finish)
        except TimeoutError:
            rec.success = False
            rec.error = f"Request timed out after {self.request_timeout_s:g} s"
        except Exception as exc:  # any transport or protocol failure fails this request
            rec.success = False
            rec.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        else:
            if response.status != 200:
                rec.success = False
                rec.error = f"HTTP {response.status} {response.reason}".rstrip()
                if excerpt := " ".join(response.excerpt.split()):
                    rec.error += f": {excerpt}"
        return rec
