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

The HTTP library sits behind :class:`Transport`, with an httpx implementation (the
default) and an aiohttp one (what bench serve uses), so the two can be compared.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from typing import Any, Literal, Protocol

import aiohttp
import httpx

from tui.domain.workload import Endpoint
from tui.load.prompts import PromptRequest
from tui.load.stats import RequestRecord

NO_VALID_CHUNK = (
    "Never received a valid chunk to calculate TTFT.This response will be marked as failed!"
)
API_KEY_ENV = "OPENAI_API_KEY"
ERROR_BODY_EXCERPT = 300  # characters of a non-200 body kept in the error text

TransportKind = Literal["httpx", "aiohttp"]

#: Called for every ``choices`` message: ``(timestamp, is_first, delta)`` where ``delta``
#: is the TTFT for the first message and the ITL afterwards (seconds).
ChunkObserver = Callable[[float, bool, float], None]


class StreamResponse(Protocol):
    """An HTTP response whose body is read as it arrives."""

    @property
    def status(self) -> int:
        """HTTP status code."""
        ...

    @property
    def reason(self) -> str:
        """HTTP reason phrase."""
        ...

    def iter_bytes(self) -> AsyncGenerator[bytes, None]:
        """Body bytes as the network delivers them."""
        ...

    async def read_excerpt(self, limit: int) -> str:
        """Up to ``limit`` bytes of the body, decoded leniently (for error texts)."""
        ...


class Transport(Protocol):
    """A pooled HTTP client able to POST JSON and stream the response."""

    def stream_post(
        self, url: str, body: dict[str, Any], headers: dict[str, str]
    ) -> AbstractAsyncContextManager[StreamResponse]:
        """POST ``body`` as JSON; leaving the context closes the response.

        Leaving it early (cancellation) must close the connection, so the server sees
        the client go away.
        """
        ...

    async def aclose(self) -> None:
        """Close every pooled connection."""
        ...


#: Builds a transport for ``(max_connections or None for unlimited, timeout_s)``.
TransportFactory = Callable[[int | None, float], Transport]


class _HttpxResponse:
    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    @property
    def status(self) -> int:
        return self._response.status_code

    @property
    def reason(self) -> str:
        return self._response.reason_phrase

    async def iter_bytes(self) -> AsyncGenerator[bytes, None]:
        raw = self._response.aiter_raw()
        try:
            async for piece in raw:
                yield piece
        finally:
            # Close httpx's own generator now rather than leave it to a finalizer task.
            aclose = getattr(raw, "aclose", None)
            if aclose is not None:
                await aclose()

    async def read_excerpt(self, limit: int) -> str:
        data = b""
        async for piece in self._response.aiter_raw():
            data += piece
            if len(data) >= limit:
                break
        return data[:limit].decode("utf-8", errors="replace")


class HttpxTransport:
    """httpx.AsyncClient, HTTP/1.1, one pool sized to the concurrency."""

    def __init__(
        self, max_connections: int | None, timeout_s: float, *, trust_env: bool = True
    ) -> None:
        limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        # No pool timeout: the runner's semaphore already bounds waiting requests, and a
        # request's whole life is bounded by the client's own per-request timeout.
        timeout = httpx.Timeout(timeout_s, pool=None)
        self._client = httpx.AsyncClient(
            limits=limits, timeout=timeout, http1=True, http2=False, trust_env=trust_env
        )

    @asynccontextmanager
    async def stream_post(
        self, url: str, body: dict[str, Any], headers: dict[str, str]
    ) -> AsyncIterator[StreamResponse]:
        """POST and stream; closing early drops the connection."""
        async with self._client.stream("POST", url, json=body, headers=headers) as response:
            yield _HttpxResponse(response)

    async def aclose(self) -> None:
        """Close the pool."""
        await self._client.aclose()


class _AiohttpResponse:
    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    @property
    def status(self) -> int:
        return self._response.status

    @property
    def reason(self) -> str:
        return self._response.reason or ""

    async def iter_bytes(self) -> AsyncGenerator[bytes, None]:
        async for piece in self._response.content.iter_any():
            yield piece

    async def read_excerpt(self, limit: int) -> str:
        data = await self._response.content.read(limit)
        return data.decode("utf-8", errors="replace")


class AiohttpTransport:
    """aiohttp.ClientSession with a connector capped at the concurrency, as bench serve.

    Must be constructed inside a running event loop.
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
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout_s, sock_read=timeout_s),
        )

    @asynccontextmanager
    async def stream_post(
        self, url: str, body: dict[str, Any], headers: dict[str, str]
    ) -> AsyncIterator[StreamResponse]:
        """POST and stream; releasing an unfinished response closes its connection."""
        async with self._session.post(url, json=body, headers=headers) as response:
            yield _AiohttpResponse(response)

    async def aclose(self) -> None:
        """Close the session and its connector."""
        await self._session.close()


def make_transport(kind: TransportKind, max_connections: int | None, timeout_s: float) -> Transport:
    """A transport by name: ``httpx`` (default) or ``aiohttp``."""
    if kind == "httpx":
        return HttpxTransport(max_connections, timeout_s)
    if kind == "aiohttp":
        return AiohttpTransport(max_connections, timeout_s)
    raise ValueError(f"unknown transport {kind!r}: expected 'httpx' or 'aiohttp'")


class SseParser:
    """Splits a server-sent-events byte stream into data payloads.

    Events end at a blank line; ``data:`` lines are joined, comment lines (``:``, used as
    pings) and events without data are skipped. UTF-8 split across network chunks is
    handled by an incremental decoder.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._buffer = ""

    def feed(self, data: bytes) -> list[str]:
        """The payloads of every event completed by ``data``."""
        # Only the unfinished tail of the last read is carried, so this stays linear.
        text = self._buffer + self._decoder.decode(data)
        if "\r" in text:
            # A "\r\n" may straddle two reads: hold a trailing "\r" back until the next.
            held = text.endswith("\r")
            text = text.removesuffix("\r").replace("\r\n", "\n").replace("\r", "\n")
            text += "\r" if held else ""
        # One split per read, never one per event: a client that falls behind gets
        # megabytes in one read, and splitting event by event would be quadratic.
        events = text.split("\n\n")
        self._buffer = events.pop()
        payloads: list[str] = []
        for event in events:
            payload = self._payload(event)
            if payload is not None:
                payloads.append(payload)
        return payloads

    def flush(self) -> list[str]:
        """The payload of a last event the server did not end with a blank line."""
        event = (self._buffer + self._decoder.decode(b"", final=True)).rstrip("\r")
        self._buffer = ""
        payload = self._payload(event)
        return [payload] if payload is not None else []

    @staticmethod
    def _payload(event: str) -> str | None:
        lines = [
            line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:")
        ]
        return "\n".join(lines) if lines else None


def resolve_api_key(api_key: str | None) -> str | None:
    """The key given, else ``$OPENAI_API_KEY``, else None (bench serve: ``:149-156``)."""
    if api_key:
        return api_key
    return os.environ.get(API_KEY_ENV) or None


def api_url(base_url: str, endpoint: Endpoint) -> str:
    """``base_url`` (with or without a trailing ``/v1``) plus the endpoint path."""
    base = base_url.strip().rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
    base = base.removesuffix("/v1")
    path = "/v1/completions" if endpoint == "completions" else "/v1/chat/completions"
    return base + path


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
        self.request_id_prefix = request_id_prefix
        self._api_key = resolve_api_key(api_key)

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
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        if request_id is not None:
            headers["x-request-id"] = request_id
        return headers

    async def send(
        self,
        prompt: PromptRequest,
        record: RequestRecord | None = None,
        on_chunk: ChunkObserver | None = None,
    ) -> RequestRecord:
        """Send ``prompt`` and fill ``record`` (a new one if None) with its measurement.

        Failures (HTTP errors, transport errors, the per-request timeout) end up in
        ``record.error`` with ``success`` False. Cancellation propagates after closing
        the stream; the record then holds what was measured so far.
        """
        rec = record if record is not None else RequestRecord()
        rec.prompt_len = prompt.prompt_len
        body = self.payload(prompt)
        headers = self.headers(f"{self.request_id_prefix}{prompt.index}")
        try:
            async with asyncio.timeout(self.request_timeout_s):
                await self._stream(body, headers, rec, on_chunk)
        except TimeoutError:
            rec.success = False
            rec.error = f"Request timed out after {self.request_timeout_s:g} s"
        except Exception as exc:  # any transport or protocol failure fails this request
            rec.success = False
            rec.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return rec

    async def _stream(
        self,
        body: dict[str, Any],
        headers: dict[str, str],
        rec: RequestRecord,
        on_chunk: ChunkObserver | None,
    ) -> None:
        generated: list[str] = []
        text_key = "text" if self.endpoint == "completions" else "content"
        st = time.perf_counter()
        rec.start_time = st
        most_recent = st
        first_received = False
        async with self._transport.stream_post(self.url, body, headers) as response:
            if response.status != 200:
                excerpt = " ".join((await response.read_excerpt(ERROR_BODY_EXCERPT)).split())
                rec.success = False
                rec.error = f"HTTP {response.status} {response.reason}".rstrip()
                if excerpt:
                    rec.error += f": {excerpt}"
                return
            parser = SseParser()

            def handle(messages: list[str]) -> None:
                nonlocal first_received, most_recent
                for message in messages:
                    if message == "[DONE]":
                        continue
                    data = json.loads(message)
                    if not isinstance(data, dict):
                        continue
                    if choices := data.get("choices"):
                        timestamp = time.perf_counter()
                        is_first = not first_received
                        if is_first:
                            first_received = True
                            rec.ttft = delta = timestamp - st
                        else:
                            delta = timestamp - most_recent
                            rec.itl.append(delta)
                        most_recent = timestamp
                        generated.append(_choice_text(choices[0], text_key))
                        if on_chunk is not None:
                            on_chunk(timestamp, is_first, delta)
                    elif usage := data.get("usage"):
                        rec.output_tokens = int(usage.get("completion_tokens") or 0)
                        if (prompt_tokens := usage.get("prompt_tokens")) is not None:
                            rec.prompt_len = int(prompt_tokens)

            # aclosing: a cancelled stream's generator is closed here and now, not by a
            # finalizer task the event loop would start later.
            async with aclosing(response.iter_bytes()) as pieces:
                async for piece in pieces:
                    handle(parser.feed(piece))
            handle(parser.flush())
        rec.generated_text = "".join(generated)
        rec.latency = most_recent - st
        if first_received:
            rec.success = True
        else:
            rec.success = False
            rec.error = NO_VALID_CHUNK


def _choice_text(choice: Any, key: str) -> str:
    """The text of one choice: ``text`` (completions) or ``delta.content`` (chat)."""
    if not isinstance(choice, dict):
        return ""
    if key == "text":
        value = choice.get("text")
    else:
        delta = choice.get("delta")
        value = delta.get("content") if isinstance(delta, dict) else None
    return value if isinstance(value, str) else ""
