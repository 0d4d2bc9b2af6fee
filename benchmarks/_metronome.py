"""A streaming server that says when it sent each token: the clients' error without its own.

    python benchmarks/_metronome.py PORT TTFT_MS ITL_MS

An OpenAI ``/v1/completions`` look-alike on 127.0.0.1 for clock measurements
(``clock_probe.py``). Each streamed token is its own HTTP/1.1 chunk, due at
``arrival + TTFT + k·ITL`` and written from a timer callback; its text carries the moment
it was actually written, ``time.perf_counter()`` (CLOCK_MONOTONIC on Linux, the same clock
in every process), and the first token also the moment the request arrived:
``" a=<arrival> w=<write>"``, then ``" w=<write>"``. A client that keeps the texts
(``--save-detailed``) thus shows, for every token, how long after the server's write it
stamped the bytes (the client's own delay, whatever the server's lateness), and how long
its request took to arrive. Usage chunk and ``[DONE]`` as vLLM sends them.
``GET /v1/models`` lists one model; anything else is a 404.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

MODEL = "metronome"


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event(obj: dict[str, object]) -> bytes:
    return _chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")


class Exchange(asyncio.Protocol):
    """One keep-alive connection; requests are answered one at a time."""

    def __init__(self, ttft: float, itl: float) -> None:
        self.ttft, self.itl = ttft, itl
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.busy = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        arrival = time.perf_counter()
        self.buf += data
        while not self.busy:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buf) < end + 4 + length:
                return
            body, self.buf = self.buf[end + 4 : end + 4 + length], self.buf[end + 4 + length :]
            self.answer(head.split(" ", 2), body, arrival)

    def answer(self, line: list[str], body: bytes, arrival: float) -> None:
        assert self.transport is not None
        if line[:2] == ["GET", "/v1/models"]:
            data = json.dumps({"object": "list", "data": [{"id": MODEL, "root": MODEL}]})
            self.transport.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(data), data.encode())
            )
            return
        if line[0] != "POST" or not line[1].endswith("/completions"):
            self.transport.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return
        request = json.loads(body or b"{}")
        total = int(request.get("max_tokens") or request.get("max_completion_tokens") or 16)
        self.busy = True
        self.transport.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        loop = asyncio.get_running_loop()
        state = {"k": 0}

        def tick() -> None:
            transport = self.transport
            if transport is None or transport.is_closing():
                self.busy = False
                return
            now = time.perf_counter()
            out = []
            while state["k"] < total and arrival + self.ttft + state["k"] * self.itl <= now:
                k = state["k"]
                text = (f" a={arrival:.7f}" if k == 0 else "") + f" w={now:.7f}"
                choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": None}
                out.append(_event({"id": "m", "object": "text_completion", "choices": [choice]}))
                state["k"] += 1
            if state["k"] >= total:
                usage = {"prompt_tokens": 1, "completion_tokens": total, "total_tokens": total + 1}
                out.append(_event({"id": "m", "choices": [], "usage": usage}))
                out.append(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
                transport.write(b"".join(out))
                self.busy = False
                if self.buf:
                    self.data_received(b"")
                return
            if out:
                transport.write(b"".join(out))
            loop.call_at(_loop_time(arrival + self.ttft + state["k"] * self.itl), tick)

        loop.call_at(_loop_time(arrival + self.ttft), tick)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


def _loop_time(perf: float) -> float:
    """A ``perf_counter`` instant on the event loop's clock."""
    loop = asyncio.get_running_loop()
    return loop.time() + (perf - time.perf_counter())


async def serve(port: int, ttft: float, itl: float) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Exchange(ttft, itl), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main() -> int:
    port, ttft_ms, itl_ms = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    asyncio.run(serve(port, ttft_ms / 1000.0, itl_ms / 1000.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
