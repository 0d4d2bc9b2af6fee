"""vtc's own HTTP/1.1 hot path: response framing, the inbox, keep-alive, failures."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from tui.domain.workload import LoadSpec
from tui.load import wire
from tui.load.client import NativeTransport, PreparedRequest
from tui.load.prompts import PromptRequest
from tui.load.schedule import Dispatcher
from tui.load.wire import (
    Connection,
    Exchange,
    Inbox,
    ProtocolError,
    Response,
    ServerDisconnected,
    StaleConnection,
)

SSE = b'data: {"choices":[{"text":"a"}]}\n\ndata: {"choices":[{"text":"b"}]}\n\ndata: [DONE]\n\n'
HEAD_CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def chunked(*pieces: bytes, trailer: bytes = b"") -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)
    return body + b"0\r\n" + trailer + b"\r\n"


class Sink:
    """Records what an exchange hands to the accounting."""

    def __init__(self) -> None:
        self.body: list[tuple[float, bytes]] = []
        self.ended: list[float] = []
        self.idle: list[Connection] = []
        self.got = asyncio.Event()

    def exchange(self, conn: Connection) -> Exchange:
        return Exchange(conn, self.feed, self.ended.append, self.idle.append)

    def feed(self, timestamp: float, data: bytes) -> None:
        self.body.append((timestamp, data))
        self.got.set()

    @property
    def data(self) -> bytes:
        return b"".join(d for _, d in self.body)


def connection() -> Connection:
    return Connection(Inbox(asyncio.get_running_loop()))


async def test_a_chunked_response_split_at_every_byte_reads_the_same() -> None:
    raw = HEAD_CHUNKED + chunked(SSE[:20], SSE[20:], trailer=b"X-Trailer: 1\r\n")
    for cut in range(1, len(raw)):
        sink = Sink()
        conn = connection()
        exchange = sink.exchange(conn)
        exchange.feed(1.0, raw[:cut])
        exchange.feed(2.0, raw[cut:])
        assert exchange.done.done(), cut
        assert exchange.done.result() == Response(200, "OK")
        assert sink.data == SSE, cut
        assert sink.ended == [2.0]
        assert sink.idle == [conn]  # kept alive


async def test_bytes_are_handed_over_with_the_timestamp_of_their_read() -> None:
    sink = Sink()
    exchange = sink.exchange(connection())
    exchange.feed(1.0, HEAD_CHUNKED + b"5\r\nhel")
    exchange.feed(2.0, b"lo\r\n3\r\nabc\r\n")
    exchange.feed(3.0, b"0\r\n\r\n")
    assert sink.body == [(1.0, b"hel"), (2.0, b"loabc")]
    assert sink.ended == [3.0]


async def test_sized_error_body_becomes_the_excerpt_and_the_body_is_not_accounted() -> None:
    sink = Sink()
    exchange = sink.exchange(connection())
    body = b'{"object":"error","message":"boom"}' + b"x" * 1000
    exchange.feed(
        1.0, b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    exchange.feed(2.0, body)
    response = exchange.done.result()
    assert (response.status, response.reason) == (500, "Internal Server Error")
    assert response.excerpt.startswith('{"object":"error","message":"boom"}')
    assert len(response.excerpt) == wire.ERROR_BODY_EXCERPT  # bounded, whatever the body
    assert sink.body == [] and sink.ended == []


async def test_interim_response_then_close_delimited_body() -> None:
    sink = Sink()
    conn = connection()
    exchange = sink.exchange(conn)
    exchange.feed(1.0, b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\n\r\n" + SSE[:10])
    exchange.feed(2.0, SSE[10:])
    assert not exchange.done.done()
    exchange.eof(3.0, reused=False)  # the body ends with the connection
    assert exchange.done.result().status == 200
    assert sink.data == SSE and sink.ended == [3.0]
    assert sink.idle == []  # HTTP/1.0, close-delimited: never reused


async def test_connection_close_header_is_not_reused() -> None:
    sink = Sink()
    exchange = sink.exchange(connection())
    exchange.feed(1.0, b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
    assert exchange.done.result().status == 200 and sink.idle == []


async def test_lost_connection_mid_body_fails_and_before_any_byte_is_stale() -> None:
    sink = Sink()
    exchange = sink.exchange(connection())
    exchange.feed(1.0, HEAD_CHUNKED + b"5\r\nhe")
    exchange.lost(2.0, reused=True)
    with pytest.raises(ServerDisconnected):
        exchange.done.result()
    fresh = Sink().exchange(connection())
    fresh.lost(1.0, reused=True)  # a kept-alive connection the server had closed
    with pytest.raises(StaleConnection):
        fresh.done.result()
    first = Sink().exchange(connection())
    first.lost(1.0, reused=False)  # a new connection closed at once: a real failure
    with pytest.raises(ServerDisconnected):
        first.done.result()


@pytest.mark.parametrize(
    "raw",
    [b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.1 abc OK\r\n\r\n", b"x" * (wire.MAX_HEAD_BYTES + 1)],
)
async def test_bytes_that_are_not_http_are_refused(raw: bytes) -> None:
    exchange = Sink().exchange(connection())
    with pytest.raises(ProtocolError):
        exchange.feed(1.0, raw)


async def test_the_inbox_drains_in_order_in_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter(range(1_000_000))
    monkeypatch.setattr(wire, "_clock", lambda: next(ticks) * 1e-4)  # 0.1 ms per reading
    loop = asyncio.get_running_loop()
    inbox = Inbox(loop)
    seen: list[int] = []

    class Recorder(Connection):
        def process(self, timestamp: float, data: bytes | None) -> None:
            assert data is not None
            seen.append(int(data))

    conn = Recorder(inbox)
    for i in range(200):
        conn.data_received(b"%d" % i)
    assert inbox.scheduled and seen == []  # stamped and queued: nothing parsed yet
    inbox.drain()
    assert 0 < len(seen) < 200  # one slice, then the loop polls its sockets again
    assert inbox.scheduled
    while inbox.scheduled:
        await asyncio.sleep(0)  # one loop pass: the drain re-scheduled itself for it
    assert seen == list(range(200))  # every item, in arrival order
    assert not inbox.scheduled and inbox.items == []


async def test_a_failure_in_one_responses_accounting_fails_that_response_only() -> None:
    loop = asyncio.get_running_loop()
    inbox = Inbox(loop)
    good, bad = Sink(), Sink()

    def broken(timestamp: float, data: bytes) -> None:
        raise ValueError("bad bytes")

    conn_bad, conn_good = Connection(inbox), Connection(inbox)
    ex_bad = Exchange(conn_bad, broken, bad.ended.append, bad.idle.append)
    ex_good = good.exchange(conn_good)
    conn_bad.exchange, conn_good.exchange = ex_bad, ex_good
    conn_bad.data_received(HEAD_CHUNKED + chunked(SSE))
    conn_good.data_received(HEAD_CHUNKED + chunked(SSE))
    inbox.drain()
    with pytest.raises(ValueError, match="bad bytes"):
        ex_bad.done.result()
    assert ex_good.done.result().status == 200 and good.data == SSE


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def serve(handler: Handler) -> tuple[asyncio.Server, str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/v1/completions"


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    return head + await reader.readexactly(length)


async def test_keep_alive_reuse_and_a_stale_connection_is_retried_once() -> None:
    connections = 0
    requests: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        first_on_this_connection = True
        while True:
            try:
                requests.append(await read_request(reader))
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            if connections == 1 and not first_on_this_connection:
                break  # a kept-alive connection dropped as the next request comes in
            writer.write(HEAD_CHUNKED + chunked(SSE))
            await writer.drain()
            first_on_this_connection = False
        writer.close()

    server, url = await serve(handler)
    transport = NativeTransport()
    request = PreparedRequest(url, b"{}", {"Content-Type": "application/json"})
    try:
        for _ in range(2):
            sink = Sink()
            response = await transport.post(request, sink.feed, sink.ended.append)
            assert response.status == 200 and sink.data == SSE
    finally:
        await transport.aclose()
        server.close()
        await server.wait_closed()
    assert connections == 2  # the second request was retried on a new connection
    assert len(requests) == 3
    assert requests[0].startswith(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nContent-Length: 2\r\n\r\n{}" in requests[0]


async def test_cancelling_a_request_closes_its_connection() -> None:
    closed = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(HEAD_CHUNKED + b"14\r\n" + SSE[:20] + b"\r\n")  # and no end
        await writer.drain()
        await reader.read()  # until the client goes away
        closed.set()
        writer.close()

    server, url = await serve(handler)
    transport = NativeTransport()
    sink = Sink()
    post = asyncio.create_task(
        transport.post(PreparedRequest(url, b"{}", {}), sink.feed, sink.ended.append)
    )
    try:
        await asyncio.wait_for(sink.got.wait(), 30)  # the first bytes reached the accounting
        post.cancel()
        with pytest.raises(asyncio.CancelledError):
            await post
        await asyncio.wait_for(closed.wait(), 30)  # bound only; the server sees the close
    finally:
        await transport.aclose()
        server.close()
        await server.wait_closed()


async def test_connections_opened_ahead_carry_the_first_requests() -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while True:
            try:
                await read_request(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            writer.write(HEAD_CHUNKED + chunked(SSE))
            await writer.drain()
        writer.close()

    server, url = await serve(handler)
    transport = NativeTransport()
    try:
        await transport.preconnect(url, 3)
        request = PreparedRequest(url, b"{}", {})
        sinks = [Sink() for _ in range(3)]
        responses = await asyncio.gather(
            *(transport.post(request, s.feed, s.ended.append) for s in sinks)
        )
        assert [r.status for r in responses] == [200] * 3
        assert all(s.data == SSE for s in sinks)
    finally:
        await transport.aclose()
        server.close()
        await server.wait_closed()
    assert connections == 3  # opened ahead, none during the requests


@pytest.mark.parametrize(
    ("changes", "needed"),
    [
        ({"num_prompts": 8, "max_concurrency": 4}, 4),  # all at once: the cap
        ({"num_prompts": 3, "max_concurrency": 4}, 3),  # ... or every prompt
        ({"num_prompts": 8, "max_concurrency": None}, 8),
        ({"num_prompts": 100, "max_concurrency": 64, "request_rate": 2.5}, 64),
        ({"num_prompts": 100, "max_concurrency": None, "request_rate": 2.5}, 3),  # 1 s
        ({"num_prompts": 8, "max_concurrency": 4, "duration_s": 5.0}, 4),  # closed loop: slots
        ({"num_prompts": 8, "max_concurrency": None, "request_rate": 5.0, "duration_s": 5.0}, 5),
    ],
)
def test_connections_needed_before_the_start(changes: dict[str, object], needed: int) -> None:
    spec = LoadSpec(**changes)  # type: ignore[arg-type]
    prompts = [PromptRequest(i, "p", 1, 1) for i in range(spec.num_prompts)]

    async def send(key: int, prompt: PromptRequest, arrival: float) -> None:
        return None

    assert Dispatcher(spec, prompts, send).connections_needed == needed
