"""A bare-bones streaming reader: the reference for what the server can deliver.

    python benchmarks/_rawclient.py HOST PORT MODEL CONCURRENCY NUM OUTPUT_LEN OUT.json [RATE]

Not a load generator: HTTP/1.1 keep-alive connections on plain asyncio protocols, the
request bytes built once, and each ``data_received`` only timestamps and counts token
chunks (no task wake-up per chunk, no JSON parsing). It gives ``loadgen.py`` two
references against the same server: the most it can stream to a client that does almost
nothing (so a client below it is limited by itself, not by the server), and the smallest
timing error a client on this machine can have. With RATE (requests/s), request i is
sent at i/RATE instead of all at once. Writes ``ttfts``, ``itls``, token and time totals
as JSON. With ``VTC_KEEP_READS=1`` (``clock_probe.py``) it also keeps each read's bytes with
its stamp and writes, per request, ``start_times`` and the ``generated_texts`` stamped
read by read (``reads``: ``[[stamp, text], ...]``), parsed only after the run.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

MARK = b'"choices":[{'
KEEP = os.environ.get("VTC_KEEP_READS") == "1"


class _Stream(asyncio.Protocol):
    """One keep-alive connection; :meth:`request` streams one response."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] | None = None
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def request(self, payload: bytes) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        self.done = loop.create_future()
        self.head = True
        self.buf = b""
        self.start = time.perf_counter()
        self.last = self.start
        self.ttft: float | None = None
        self.itls: list[float] = []
        self.reads: list[tuple[float, bytes]] = []
        assert self.transport is not None
        self.transport.write(payload)
        return self.done

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        if KEEP:
            self.reads.append((now, data))
        buf = self.buf + data
        if self.head:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                self.buf = buf
                return
            self.head = False
            buf = buf[end + 4 :]
        tokens = 0
        pos = 0
        finished = False
        while True:  # HTTP/1.1 chunked transfer encoding
            line_end = buf.find(b"\r\n", pos)
            if line_end < 0:
                break
            size = int(buf[pos:line_end].split(b";", 1)[0], 16)
            if size == 0:
                finished = True
                pos = line_end + 4
                break
            if len(buf) < line_end + 2 + size + 2:
                break
            tokens += buf.count(MARK, line_end + 2, line_end + 2 + size)
            pos = line_end + 2 + size + 2
        self.buf = buf[pos:]
        if tokens:
            if self.ttft is None:
                self.ttft = now - self.start
                self.itls.extend([0.0] * (tokens - 1))
            else:
                self.itls.append(now - self.last)
                self.itls.extend([0.0] * (tokens - 1))
            self.last = now
        if finished and self.done is not None and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.done is not None and not self.done.done():
            self.done.set_exception(ConnectionError("connection lost"))


async def run(
    host: str,
    port: int,
    model: str,
    concurrency: int,
    num: int,
    output_len: int,
    rate: float = 0.0,
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    body = json.dumps(
        {
            "model": model,
            "prompt": " ".join(["hello"] * 31),
            "max_tokens": output_len,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": True,
        }
    ).encode()
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    payload = head.encode() + body
    pool: list[_Stream] = []
    slots = asyncio.Semaphore(concurrency)
    ttfts: list[float] = []
    itls: list[list[float]] = []
    starts: list[float] = []
    reads: list[list[tuple[float, bytes]]] = []

    async def one(i: int) -> None:
        if rate > 0:
            await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
        async with slots:
            stream = pool.pop() if pool else None
            if stream is None or stream.lost:
                _, stream = await loop.create_connection(_Stream, host, port)
            await stream.request(payload)
            ttfts.append(stream.ttft or 0.0)
            itls.append(stream.itls)
            starts.append(stream.start)
            reads.append(stream.reads)
            pool.append(stream)

    cpu = time.process_time()
    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(num)))
    duration = time.perf_counter() - start
    cpu = time.process_time() - cpu
    for stream in pool:
        if stream.transport is not None:
            stream.transport.close()
    tokens = len(ttfts) + sum(len(i) for i in itls)
    return {
        "completed": len(ttfts),
        "duration": duration,
        "total_output_tokens": tokens,
        "output_throughput": tokens / duration,
        "client_cpu_s": cpu,
        "ttfts": ttfts,
        "itls": itls,
        **(
            {
                "start_times": starts,
                "reads": [[(t, d.decode("latin-1")) for t, d in r] for r in reads],
            }
            if KEEP
            else {}
        ),
    }


def main() -> int:
    host, port, model, conc, num, out_len, path = sys.argv[1:8]
    rate = float(sys.argv[8]) if len(sys.argv) > 8 else 0.0
    result = asyncio.run(run(host, int(port), model, int(conc), int(num), int(out_len), rate))
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
