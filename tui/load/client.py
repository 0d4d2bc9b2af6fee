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

The HTTP library sits behind :class:`Transport`, with an aiohttp implementation (the
default: what bench serve uses, and ~10x faster than httpx on this hot path, see
``benchmarks/README.md``) and an httpx one, so the two can be compared.

The hot path does per read: one ``await`` on the transport's ``read_chunk``, one
``perf_counter``, one bytes split, and per SSE message one substring test. A message of
vLLM's compact JSON that holds ``"choices":[{`` is a token chunk without parsing it; only
the usage chunk (and anything unusual) goes through ``json.loads``. The text of token
chunks is decoded after the stream ends, and only when it is needed: when the caller asks
for it (``collect_text``) or when the server sent no usage (bench serve then counts the
generated text's tokens, ``serve.py:607-622``). All messages of one read share one
timestamp, the moment the bytes reached the client.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from itertools import repeat
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

    @property
    def read_chunk(self) -> Callable[[], Awaitable[bytes]]:
        """Reads the next body bytes as the network delivers them; ``b""`` at the end.

        A property returning the reader itself, so the hot loop calls it without a
        wrapper (for aiohttp it is ``StreamReader.readany``).
        """
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
        self._raw = response.aiter_raw()

    @property
    def status(self) -> int:
        return self._response.status_code

    @property
    def reason(self) -> str:
        return self._response.reason_phrase

    @property
    def read_chunk(self) -> Callable[[], Awaitable[bytes]]:
        return self._next

    async def _next(self) -> bytes:
        try:
            return await anext(self._raw)
        except StopAsyncIteration:
            return b""

    async def aclose(self) -> None:
        # Close httpx's own generator now rather than leave it to a finalizer task.
        aclose = getattr(self._raw, "aclose", None)
        if aclose is not None:
            await aclose()

    async def read_excerpt(self, limit: int) -> str:
        data = b""
        while len(data) < limit and (piece := await self._next()):
            data += piece
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
            wrapped = _HttpxResponse(response)
            try:
                yield wrapped
            finally:
                await wrapped.aclose()

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

    @property
    def read_chunk(self) -> Callable[[], Awaitable[bytes]]:
        return self._response.content.readany

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
            # Only the connect phase gets aiohttp's timer: a sock_read timeout re-arms a
            # timer on every read, and the client's own per-request timeout covers reads.
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout_s),
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
    """A transport by name: ``aiohttp`` (the default elsewhere) or ``httpx``."""
    if kind == "httpx":
        return HttpxTransport(max_connections, timeout_s)
    if kind == "aiohttp":
        return AiohttpTransport(max_connections, timeout_s)
    raise ValueError(f"unknown transport {kind!r}: expected 'httpx' or 'aiohttp'")


#: Marks a token chunk in vLLM's compact JSON without parsing it. Inside a JSON string
#: every quote is escaped, so these bytes can only be the top-level key with a non-empty
#: list; anything else (spaced JSON, usage, errors) takes the ``json.loads`` path.
TOKEN_MARK = b'"choices":[{'


class SseParser:
    """Splits a server-sent-events byte stream into data payloads (bytes).

    Events end at a blank line; ``data:`` lines are joined, comment lines (``:``, used as
    pings) and events without data are skipped. It works on bytes, never decoding: a
    UTF-8 character cut between two reads is simply held with the unfinished event, and
    ``json.loads`` takes the payload bytes as they are.

    :meth:`feed` returns every payload. :meth:`scan` is the client's hot path: it only
    *counts* the events whose payload holds :data:`TOKEN_MARK` and returns the payloads of
    the others; when every completed event is one ``data: `` line holding the mark (the
    usual case), that takes a handful of C-level byte operations per read, whatever the
    number of events in it.
    """

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    def _take(self, data: bytes) -> bytes:
        """The completed events of the buffer plus ``data`` (ending in a blank line)."""
        # Only the unfinished tail of the last read is carried, so this stays linear.
        text = self._buffer + data if self._buffer else data
        if b"\r" in text:
            # A "\r\n" may straddle two reads: hold a trailing "\r" back until the next.
            held = text.endswith(b"\r")
            text = text.removesuffix(b"\r").replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            text += b"\r" if held else b""
        cut = text.rfind(b"\n\n")
        if cut < 0:
            self._buffer = text
            return b""
        self._buffer = text[cut + 2 :]
        return text[: cut + 2]

    def feed(self, data: bytes) -> list[bytes]:
        """The payloads of every event completed by ``data``."""
        return self.payloads(self._take(data))

    def scan(self, data: bytes) -> tuple[int, list[bytes], bytes]:
        """``(tokens, others, block)`` for the events completed by ``data``.

        ``tokens`` counts the events whose payload holds :data:`TOKEN_MARK`; ``others`` are
        the payloads of the rest, in order; ``block`` is the completed events' bytes, from
        which :meth:`payloads` recovers the token payloads later if their text is wanted.
        """
        block = self._take(data)
        if not block:
            return 0, [], block
        events = block.count(b"\n\n")
        # Every event one "data: " line? (Payloads hold no raw newline, so counting
        # newlines and line starts decides it exactly.)
        if block.count(b"\n") == 2 * events and (
            block.count(b"\ndata: ") + block.startswith(b"data: ") == events
        ):
            tokens = block.count(TOKEN_MARK)
            if tokens == events:
                return tokens, [], block
        tokens = 0
        others: list[bytes] = []
        for payload in self.payloads(block):
            if TOKEN_MARK in payload:
                tokens += 1
            else:
                others.append(payload)
        return tokens, others, block

    def flush(self) -> list[bytes]:
        """The payload of a last event the server did not end with a blank line."""
        event = self._buffer.rstrip(b"\r")
        self._buffer = b""
        payload = self._payload(event)
        return [payload] if payload is not None else []

    @classmethod
    def payloads(cls, block: bytes) -> list[bytes]:
        """The payloads of the complete events in ``block``."""
        out: list[bytes] = []
        for event in block.split(b"\n\n")[:-1]:
            if event.startswith(b"data: ") and b"\n" not in event:
                out.append(event[6:])
                continue
            payload = cls._payload(event)
            if payload is not None:
                out.append(payload)
        return out

    @staticmethod
    def _payload(event: bytes) -> bytes | None:
        lines = [
            line[5:].removeprefix(b" ") for line in event.split(b"\n") if line.startswith(b"data:")
        ]
        return b"\n".join(lines) if lines else None


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
        collect_text: bool = True,
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
        self.collect_text = collect_text
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
        # What token chunks said: blocks of compact events (decoded after the stream, and
        # only if the text is wanted) or the text of chunks that went through json.loads.
        token_pieces: list[bytes | str] = []
        keep = token_pieces.append
        add_itl = rec.itl.append
        more_itls = rec.itl.extend
        clock = time.perf_counter
        st = clock()
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
            scan = parser.scan
            read = response.read_chunk
            others: list[bytes]
            last_yield = st
            while True:
                data = await read()
                timestamp = clock()  # when the bytes reached the client
                if timestamp - last_yield >= _YIELD_EVERY_S:
                    # A read of buffered bytes returns without suspending: a fast stream
                    # would starve the loop (progress ticks, the UI, other streams' clocks).
                    await asyncio.sleep(0)
                    last_yield = timestamp = clock()
                if data:
                    tokens, others, block = scan(data)
                    if tokens:
                        keep(block)
                    elif not others:
                        continue
                else:
                    tokens, others = 0, parser.flush()
                for payload in others:
                    if TOKEN_MARK in payload:  # a compact event split over lines
                        tokens += 1
                        keep(_payload_text(payload, self.endpoint))
                        continue
                    if payload == b"[DONE]":
                        continue
                    data_obj = json.loads(payload)
                    if not isinstance(data_obj, dict):
                        continue
                    if choices := data_obj.get("choices"):
                        # Non-empty choices (text may be empty): a token chunk.
                        tokens += 1
                        keep(_choice_text(choices[0], self.endpoint))
                    elif usage := data_obj.get("usage"):
                        rec.output_tokens = int(usage.get("completion_tokens") or 0)
                        if (prompt_tokens := usage.get("prompt_tokens")) is not None:
                            rec.prompt_len = int(prompt_tokens)
                if tokens:
                    # The first chunk of a read gets the gap since the last one; chunks
                    # that came in the same read arrived together: gaps of 0.
                    was_first = not first_received
                    if was_first:
                        first_received = True
                        rec.ttft = delta = timestamp - st
                    else:
                        delta = timestamp - most_recent
                        add_itl(delta)
                    if tokens > 1:
                        more_itls(repeat(0.0, tokens - 1))
                    most_recent = timestamp
                    if on_chunk is not None:
                        on_chunk(timestamp, was_first, delta)
                        for _ in range(tokens - 1):
                            on_chunk(timestamp, False, 0.0)
                if not data:
                    break
        if self.collect_text or not rec.output_tokens:
            rec.generated_text = "".join(
                _piece_text(piece, self.endpoint) for piece in token_pieces
            )
        rec.latency = most_recent - st
        if token_pieces and _ABORTED.search(_piece_bytes(token_pieces[-1])):
            rec.aborted_by_server = True
        if first_received:
            rec.success = True
        else:
            rec.success = False
            rec.error = NO_VALID_CHUNK


# Longest a stream's read loop runs without letting the event loop serve other tasks.
_YIELD_EVERY_S = 0.005

# The last token chunk of a stream the server cut short (vLLM: shutdown, engine error).
_ABORTED = re.compile(rb'"finish_reason"\s*:\s*"(?:abort|error)"')


def _piece_bytes(piece: bytes | str) -> bytes:
    return piece.encode() if isinstance(piece, str) else piece


def _piece_text(piece: bytes | str, endpoint: Endpoint) -> str:
    if isinstance(piece, str):
        return piece
    return "".join(_payload_text(p, endpoint) for p in SseParser.payloads(piece) if TOKEN_MARK in p)


def _payload_text(payload: bytes, endpoint: Endpoint) -> str:
    """The text of a token chunk's payload (decoded after the stream)."""
    data = json.loads(payload)
    choices = data.get("choices") if isinstance(data, dict) else None
    return _choice_text(choices[0], endpoint) if choices else ""


def _choice_text(choice: Any, endpoint: Endpoint) -> str:
    """The text of one choice: ``text`` (completions) or ``delta.content`` (chat)."""
    if not isinstance(choice, dict):
        return ""
    if endpoint == "completions":
        value = choice.get("text")
    else:
        delta = choice.get("delta")
        value = delta.get("content") if isinstance(delta, dict) else None
    return value if isinstance(value, str) else ""
