"""Injected fixed delays (``--sim-fixed-*``): a stream's tokens written from timer callbacks.

Made for benchmarking load clients, where the simulator must stay far from being the
bottleneck at a thousand streams on a shared core. A coroutine per stream waking per
token costs tens of microseconds per token through aiohttp's writer; here each due token
costs one ``loop.call_at`` callback and one ``transport.write`` of a pre-built HTTP chunk.

Token ``k`` is due at ``arrival + ttft + k·itl``. When the callback runs late (the server
fell behind), every token due by then goes out in one write, so the schedule never
drifts. When the client stops reading and the socket's write buffer passes
``HIGH_WATER`` bytes, writing pauses (polled every millisecond) and resumes with
everything due; that is the back-pressure a real server applies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web

from tui.sim.argv import FixedTiming
from tui.sim.generation import SSE_HEADERS, Generation, json_response, validate_lengths
from tui.sim.tokenizer import GEN_WORDS

HIGH_WATER = 256 * 1024
PAUSE_S = 0.001


class FixedStream:
    """Writes tokens ``start .. total-1`` of one response on the injected schedule.

    ``frames(k, last)`` returns the SSE bytes of tokens ``k..last``; they are framed as one
    HTTP/1.1 chunk (the response must already be prepared with chunked encoding and have
    written its first bytes, so its headers are out). :attr:`done` resolves to True when
    the last token is written, False when the client went away.
    """

    def __init__(
        self,
        transport: asyncio.BaseTransport,
        frames: Callable[[int, int], bytes],
        total: int,
        timing: FixedTiming,
        arrival: float,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        if not isinstance(transport, asyncio.WriteTransport):
            raise TypeError("a writable transport is needed")
        self._transport = transport
        self._frames = frames
        self._total = total
        self._timing = timing
        self._arrival = arrival
        self._next = 0
        self._handle: asyncio.TimerHandle | None = None
        self.done: asyncio.Future[bool] = self._loop.create_future()

    def start(self, k: int) -> None:
        """Schedule token ``k`` and the rest."""
        self._next = k
        if k >= self._total:
            self._finish(True)
            return
        self._handle = self._loop.call_at(self._arrival + self._timing.offset(k), self._tick)

    def cancel(self) -> None:
        """Stop writing (the handler is going away)."""
        if self._handle is not None:
            self._handle.cancel()
        self._finish(False)

    def _finish(self, ok: bool) -> None:
        if not self.done.done():
            self.done.set_result(ok)

    def _tick(self) -> None:
        self._handle = None
        transport = self._transport
        if transport.is_closing():
            self._finish(False)
            return
        if transport.get_write_buffer_size() > HIGH_WATER:
            self._handle = self._loop.call_later(PAUSE_S, self._tick)
            return
        k = self._next
        last = self._total - 1
        if self._timing.itl_s > 0:
            elapsed = self._loop.time() - self._arrival - self._timing.ttft_s
            last = min(last, max(k, int(elapsed / self._timing.itl_s)))
        data = self._frames(k, last)
        transport.write(b"%x\r\n%b\r\n" % (len(data), data))
        self.start(last + 1)


# -- a generation request on the injected schedule ------------------------------------------
def plan_fixed(
    gen: Generation, prompts: list[list[int]], max_tokens: int | None, n: int
) -> list[int]:
    """Fixed-delay mode: validate like :meth:`submit`; tokens per sequence, no engine."""
    counts: list[int] = []
    gen.prompts = prompts
    for k, ids in enumerate(prompts):
        used = validate_lengths(gen.ctx.max_model_len, len(ids), max_tokens)
        gen.prompt_tokens += len(ids)
        counts.extend([max(1, used)] * n)
        gen.prompt_of.extend([k] * n)
    return counts


def _fixed_frames(gen: Generation, counts: list[int]) -> tuple[list[str], list[list[bytes]]]:
    words = [" " + w for w in GEN_WORDS[:8]]
    frames = [[gen.frame([gen.choice(i, w, None, [])]) for w in words] for i in range(len(counts))]
    return words, frames


async def stream_fixed(
    gen: Generation, request: web.Request, timing: FixedTiming, counts: list[int], arrival: float
) -> web.StreamResponse:
    """Stream on the injected schedule: token k at ``arrival + ttft + k·itl``.

    The first write goes through aiohttp (it sends the headers); the rest are written
    from timer callbacks by :class:`~tui.sim.fixed.FixedStream`, with frames built
    once per sequence, so the simulator keeps pace at a thousand streams.
    """
    loop = asyncio.get_running_loop()
    resp = web.StreamResponse(headers=SSE_HEADERS)
    await resp.prepare(request)
    words, frames = _fixed_frames(gen, counts)
    single = frames[0] if len(counts) == 1 and not gen.chat and not gen.return_ids else None
    n_words = len(words)

    def build(k: int, last: int) -> bytes:
        if single is not None and last < counts[0] - 1:  # the common case, no finish
            if k == last:
                return single[k % n_words]
            return b"".join([single[j % n_words] for j in range(k, last + 1)])
        parts: list[bytes] = []
        for j in range(k, last + 1):
            for i, count in enumerate(counts):
                if j >= count:
                    continue
                if gen.chat and j == 0:
                    parts.append(gen.role_frame(i))
                word = words[j % n_words]
                done = "length" if j == count - 1 else None
                choice = gen.choice(i, word, done, [], first=j == 0)
                parts.append(gen.frame([choice], terminal=done is not None))
        return b"".join(parts)

    total = max(counts)
    stream: FixedStream | None = None
    try:
        await asyncio.sleep(max(0.0, arrival + timing.offset(0) - loop.time()))
        last = total - 1
        if timing.itl_s > 0:
            elapsed = loop.time() - arrival - timing.ttft_s
            last = min(total - 1, max(0, int(elapsed / timing.itl_s)))
        await resp.write(build(0, last))
        if last + 1 < total:
            if request.transport is None:
                return resp  # the client went away
            stream = FixedStream(request.transport, build, total, timing, arrival)
            stream.start(last + 1)
            if not await stream.done:
                return resp  # the client went away
        if gen.include_usage:
            # Fixed mode: no queue; the first token is due ttft after arrival.
            timings = {"time_to_first_token_ms": timing.ttft_s * 1000, "queue_time_ms": 0.0}
            await resp.write(gen.usage_frame(sum(counts), timings))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
    except ConnectionResetError:
        pass  # the client went away; nothing to free in fixed mode
    finally:
        if stream is not None:
            stream.cancel()
    return resp


async def complete_fixed(
    gen: Generation, timing: FixedTiming, counts: list[int], arrival: float
) -> web.Response:
    """Fixed-delay mode without streaming: answer when the last token is due."""
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, arrival + timing.offset(max(counts) - 1) - loop.time()))
    words = [" " + w for w in GEN_WORDS]
    texts = ["".join(words[j % len(words)] for j in range(c)) for c in counts]
    finish = {i: "length" for i in range(len(counts))}
    return json_response(gen.body_json(texts, finish, sum(counts)))
