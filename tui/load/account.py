"""Accounting: what each response's bytes mean, the run's records, and the client's health.

Three parts, none of them between a socket and the timestamp of the bytes it delivers
(the transports stamp each read first and hand the bytes here afterwards):

- :class:`StreamRecorder` turns one response's body, read by read, into its
  :class:`~tui.load.stats.RequestRecord`, as ``benchmarks/lib/endpoint_request_func.py``
  measures (reference section 4.1, see :mod:`tui.load.client`);
- :class:`Ledger` holds the run's records in dispatch order, who is in flight, and which
  requests a cancel cut short;
- :class:`Ticker` wakes every ``lag_tick_s`` to measure how late the event loop runs
  (the client's own delay), and once an interval turns the ledger's live numbers into a
  :class:`~tui.domain.workload.LoadProgress`, deciding whether the client rather than the
  server is the bottleneck (:func:`~tui.load.live.client_is_bottleneck`).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import re
import time
from collections.abc import Callable
from itertools import repeat
from typing import Any

from tui.domain.json_text import loads_json
from tui.domain.workload import Endpoint, LoadProgress
from tui.load.live import LiveStats
from tui.load.prompts import PromptRequest
from tui.load.sse import TOKEN_MARK, SseParser
from tui.load.stats import RequestRecord

log = logging.getLogger(__name__)

NO_VALID_CHUNK = (
    "Never received a valid chunk to calculate TTFT.This response will be marked as failed!"
)
CANCELLED_ERROR = "cancelled"

#: Bytes of token chunks kept per response for its text when the text is not asked for:
#: enough to count a short response's tokens when the server sends no usage (bench serve
#: then tokenizes the text, ``serve.py:607-622``); past it the chunk count stands in.
TEXT_FALLBACK_BYTES = 64 * 1024

# The last token chunk of a stream the server cut short (vLLM: shutdown, engine error).
_ABORTED = re.compile(rb'"finish_reason"\s*:\s*"(?:abort|error)"')

ProgressCallback = Callable[[LoadProgress], None]


class StreamRecorder:
    """Fills one request's record from its response body, as bench serve measures it.

    :meth:`feed` takes the bytes of one read and the moment they reached the client;
    every ``choices`` message completed by them shares that timestamp (the first gets the
    gap since the previous one, the rest gaps of 0). Only the usage chunk, and anything
    unusual, goes through ``json.loads``; a compact vLLM token chunk is recognised by
    :data:`~tui.load.sse.TOKEN_MARK` without parsing. Token text is decoded at
    :meth:`finish`, and only when wanted (``collect_text``) or when the server sent no
    usage.
    """

    __slots__ = (
        "_chunks",
        "_first",
        "_kept",
        "_last",
        "_parser",
        "_pieces",
        "_tail",
        "_truncated",
        "collect_text",
        "endpoint",
        "rec",
    )

    def __init__(self, rec: RequestRecord, endpoint: Endpoint, collect_text: bool) -> None:
        self.rec = rec
        self.endpoint: Endpoint = endpoint
        self.collect_text = collect_text
        self._parser = SseParser()
        self._first = False
        self._last = rec.start_time
        self._chunks = 0
        self._pieces: list[bytes | str] = []
        self._kept = 0
        self._truncated = False
        self._tail: bytes | str | None = None

    def feed(self, timestamp: float, data: bytes) -> None:
        """The body bytes of one read, which reached the client at ``timestamp``."""
        tokens, others, block = self._parser.scan(data)
        if tokens:
            self._keep(block)
        elif not others:
            return
        for payload in others:
            tokens += self._other(payload)
        if tokens:
            self._tokens(timestamp, tokens)

    def finish(self, timestamp: float) -> None:
        """The body ended at ``timestamp``: latency, success, text, server aborts."""
        tokens = sum(self._other(payload) for payload in self._parser.flush())
        if tokens:
            self._tokens(timestamp, tokens)
        rec = self.rec
        rec.latency = self._last - rec.start_time
        if self.collect_text or not rec.output_tokens:
            if self._truncated and not rec.output_tokens:
                rec.output_tokens = self._chunks  # too long to keep: one token per chunk
            else:
                rec.generated_text = "".join(self._text(piece) for piece in self._pieces)
        tail = self._tail
        if tail is not None and _ABORTED.search(tail.encode() if isinstance(tail, str) else tail):
            rec.aborted_by_server = True
        if self._first:
            rec.success = True
        else:
            rec.success = False
            rec.error = NO_VALID_CHUNK

    def _tokens(self, timestamp: float, count: int) -> None:
        rec = self.rec
        if self._first:
            rec.itl.append(timestamp - self._last)
        else:
            self._first = True
            rec.ttft = timestamp - rec.start_time
        if count > 1:
            rec.itl.extend(repeat(0.0, count - 1))
        self._last = timestamp
        self._chunks += count

    def _keep(self, piece: bytes | str) -> None:
        self._tail = piece
        if self.collect_text or self._kept < TEXT_FALLBACK_BYTES:
            self._pieces.append(piece)
            self._kept += len(piece)
        else:
            self._truncated = True

    def _other(self, payload: bytes) -> int:
        """A payload off the fast path; 1 when it is a token chunk."""
        if TOKEN_MARK in payload:  # a compact event split over lines: kept as an event
            self._keep(b"data: " + payload.replace(b"\n", b"\ndata: ") + b"\n\n")
            return 1
        if payload == b"[DONE]":
            return 0
        data = loads_json(payload)
        if not isinstance(data, dict):
            return 0
        if isinstance(choices := data.get("choices"), list) and choices:
            # Non-empty choices (the text may be empty): a token chunk.
            self._keep(_choice_text(choices[0], self.endpoint))
            return 1
        if isinstance(usage := data.get("usage"), dict):
            self.rec.output_tokens = _count(usage.get("completion_tokens")) or 0
            if (prompt_tokens := _count(usage.get("prompt_tokens"))) is not None:
                self.rec.prompt_len = prompt_tokens
        if isinstance(metrics := data.get("metrics"), dict):
            # vLLM 0.33 sends them on the final usage chunk only (bench serve's
            # _update_server_metrics, benchmarks/lib/endpoint_request_func.py:109-125).
            self.rec.server_queue_time = _seconds(metrics.get("queue_time_ms"))
            self.rec.server_ttft = _seconds(metrics.get("time_to_first_token_ms"))
        return 0

    def _text(self, piece: bytes | str) -> str:
        if isinstance(piece, str):
            return piece
        return "".join(
            _payload_text(p, self.endpoint) for p in SseParser.payloads(piece) if TOKEN_MARK in p
        )


MAX_SERVER_MS = 1e9
"""The most milliseconds a server-reported time may be (11 days): more is no measurement."""


def _seconds(value: object) -> float | None:
    """Milliseconds from the server as seconds; ``None`` for anything not a plausible time:
    not a number, ``nan``/``inf``, negative, or past :data:`MAX_SERVER_MS` (a 400-digit
    integer too: it is compared, never divided, so no ``OverflowError``)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    if not (0 <= value <= MAX_SERVER_MS):  # False for nan
        return None
    return float(value) / 1000.0


def _count(value: object) -> int | None:
    """A token count from the server; ``None`` unless a whole number from 0 to 2**31."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not (0 <= value <= 2**31) or value != int(value):  # nan fails the first test
        return None
    return int(value)


def _payload_text(payload: bytes, endpoint: Endpoint) -> str:
    """The text of a token chunk's payload (decoded after the stream)."""
    data = loads_json(payload)
    choices = data.get("choices") if isinstance(data, dict) else None
    return _choice_text(choices[0], endpoint) if isinstance(choices, list) and choices else ""


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


class Ledger:
    """The run's requests: records in dispatch order, prompts sent, live counters.

    :meth:`open` when a request is sent, :meth:`close` when it ends, whatever the way.
    After :meth:`cancel`, a request that ends without success counts as cancelled (error
    ``"cancelled"``): the cancel closed its stream, whatever error that surfaced as.
    """

    def __init__(self, total: int, window_s: float) -> None:
        self.live = LiveStats(total, window_s)
        self._records: dict[int, RequestRecord] = {}
        self._prompts: dict[int, PromptRequest] = {}
        self.cancelled = False

    def open(self, key: int, prompt: PromptRequest) -> RequestRecord:
        """A request goes out now: its record, registered as in flight."""
        record = RequestRecord(prompt_len=prompt.prompt_len)
        self._records[key] = record
        self._prompts[key] = prompt
        self.live.started(key, record)
        return record

    def close(self, key: int, record: RequestRecord) -> None:
        """A sent request ended (success, failure or cancel)."""
        if self.cancelled and not record.success:
            record.success = False
            record.error = CANCELLED_ERROR
        self.live.ended(key, record)

    def cancel(self) -> None:
        """From now on, requests that end without success were cut short by the cancel."""
        self.cancelled = True

    @property
    def sent(self) -> int:
        """Requests sent so far."""
        return len(self._records)

    def measured(self) -> tuple[list[RequestRecord], list[PromptRequest]]:
        """Every sent request's record and prompt, in dispatch order."""
        return list(self._records.values()), list(self._prompts.values())


class Ticker:
    """The client's event-loop lag every tick, progress every interval.

    Sleeping in short ticks, how late each tick wakes is the lag: a chunk that reached
    the socket meanwhile is stamped about that late. The worst lag of the run and the
    seconds judged client-bound are kept for the result.

    With ``refreeze`` (processes that exist to run one load, whose heap the runner froze
    before the run, as bench serve does) each tick also freezes what the run allocated
    since the last one: a garbage collection then only ever scans one tick's young
    objects. Without it a collection of the oldest generation scans every request's
    objects and takes tens of milliseconds of CPU at a thousand streams (measured, see
    ``benchmarks/README.md``), during which no read is stamped. The cyclic garbage a run
    makes (measured: about 0.3 objects per request) waits for the end of the run.
    """

    def __init__(
        self,
        live: LiveStats,
        on_progress: ProgressCallback | None,
        *,
        interval_s: float,
        tick_s: float,
        refreeze: bool = False,
    ) -> None:
        self._live = live
        self._refreeze = refreeze
        self._on_progress = on_progress
        self._interval_s = interval_s
        self._tick_s = tick_s
        self.worst_lag_s = 0.0
        self.client_bound_s = 0.0

    async def run(self, start: float) -> None:
        """Tick until cancelled; ``start`` is the run's start (``perf_counter``)."""
        max_lag = lag_sum = 0.0
        ticks = 0
        last_emit = start
        self._snapshot(start, start, None, None)  # the CPU baseline
        expected = time.perf_counter() + self._tick_s
        while True:
            await asyncio.sleep(max(0.0, expected - time.perf_counter()))
            now = time.perf_counter()
            if self._refreeze:
                gc.freeze()  # O(1): the young objects join the frozen heap
            lag = max(0.0, now - expected)
            max_lag = max(max_lag, lag)
            lag_sum += lag
            ticks += 1
            expected = now + self._tick_s
            if now - last_emit >= self._interval_s:
                progress = self._snapshot(now, start, max_lag, lag_sum / ticks)
                if progress.client_bound:
                    self.client_bound_s += now - last_emit
                self.worst_lag_s = max(self.worst_lag_s, max_lag)
                self.emit(progress)
                max_lag = lag_sum = 0.0
                ticks = 0
                last_emit = now

    def final(self, end: float, start: float) -> None:
        """The last progress, at the end of the run."""
        self.emit(self._snapshot(end, start, None, None))

    def emit(self, progress: LoadProgress) -> None:
        """Hand ``progress`` to the callback; its failures are logged, never raised."""
        if self._on_progress is None:
            return
        try:
            self._on_progress(progress)
        except Exception:  # a broken display must not stop the load
            log.exception("load progress callback failed")

    def _snapshot(
        self, now: float, start: float, max_lag: float | None, mean_lag: float | None
    ) -> LoadProgress:
        return self._live.snapshot(
            now, now - start, max_lag_s=max_lag, mean_lag_s=mean_lag, cpu_s=time.process_time()
        )
