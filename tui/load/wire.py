"""vtc's own HTTP/1.1 client for the load's hot path: stamp the bytes first, account later.

Timing truth needs the moment bytes reach the client, and the error of that moment is how
long the event loop is busy elsewhere when they arrive. So the path from the socket to
the timestamp holds nothing but the event loop's own read: each connection is a plain
:class:`asyncio.Protocol` whose :meth:`~Connection.data_received` takes
``time.perf_counter()`` and appends ``(connection, timestamp, bytes)`` to a shared
:class:`Inbox`. No task wakes per read, nothing is parsed there.

The inbox is drained by one callback per loop pass, in slices of at most
:data:`SLICE_S`: HTTP framing (status, headers, chunked or sized bodies), then the
response's accounting (SSE parsing, token counting: :class:`~tui.load.account.StreamRecorder`).
Between slices the loop polls its sockets again, so a long backlog of accounting never
delays the next reads' timestamps by more than a slice.

A request's coroutine wakes twice: when its request is written and when its response is
complete. Connections are kept alive and reused (one exchange at a time each); a reused
connection the server had closed before answering is retried once on a new one
(:class:`StaleConnection`), as HTTP clients do for idle keep-alive races. Cancelling the
awaiting coroutine aborts the connection at once, so the server sees the client go away.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from tui.load.errors import LoadError

#: Longest stretch of accounting work between two polls of the sockets.
SLICE_S = 0.0005
#: Bytes of a non-200 body kept for the error text.
ERROR_BODY_EXCERPT = 300
#: Largest response head accepted (status line and headers).
MAX_HEAD_BYTES = 64 * 1024

_clock = time.perf_counter


class ServerDisconnected(ConnectionError):
    """The server closed the connection before the response was complete."""


class StaleConnection(ConnectionError):
    """A reused keep-alive connection was closed by the server before any response byte."""


class ProtocolError(ValueError):
    """The server's bytes are not an HTTP/1.1 response."""


@dataclass(frozen=True)
class HttpTarget:
    """Where the requests go: address, request path, ``Host`` header, TLS."""

    host: str
    port: int
    path: str
    host_header: str
    tls: bool

    @classmethod
    def from_url(cls, url: str) -> HttpTarget:
        """``http(s)://host[:port]/path`` (``ValueError`` for anything else)."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise LoadError(f"not an http(s) URL with a host: {url!r}")
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        host = parts.hostname
        shown = f"[{host}]" if ":" in host else host
        default = port == (443 if tls else 80)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return cls(host, port, path, shown if default else f"{shown}:{port}", tls)


@dataclass(frozen=True)
class Response:
    """How an exchange ended: status, reason and, for a non-200, the body's start."""

    status: int
    reason: str
    excerpt: str = ""


class Inbox:
    """Stamped reads waiting for their accounting, drained once per loop pass in slices."""

    __slots__ = ("_loop", "_pos", "items", "scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.items: list[tuple[Connection, float, bytes | None]] = []
        self._pos = 0
        self.scheduled = False

    def wake(self) -> None:
        """Schedule a drain (called by a connection after it appended an item)."""
        self.scheduled = True
        self._loop.call_soon(self.drain)

    def drain(self) -> None:
        """Process items in arrival order for at most :data:`SLICE_S`, then yield."""
        items = self.items
        i = self._pos
        started = _clock()
        while i < len(items):
            conn, timestamp, data = items[i]
            i += 1
            try:
                conn.process(timestamp, data)
            except Exception as exc:  # one response's bad bytes fail that response only
                conn.fail(exc)
            if not i & 31 and _clock() - started > SLICE_S:
                break
        if i < len(items):
            self._pos = i
            self._loop.call_soon(self.drain)
            return
        items.clear()
        self._pos = 0
        self.scheduled = False


class Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; one exchange at a time."""

    def __init__(self, inbox: Inbox) -> None:
        self._inbox = inbox
        self._items = inbox.items
        self.transport: asyncio.Transport | None = None
        self.exchange: Exchange | None = None
        self.closed = False  # the peer closed, or the connection is gone
        self.used = 0  # exchanges started on it

    # -- the hot path: stamp, queue, nothing else -----------------------------------------------
    def data_received(self, data: bytes) -> None:
        """Bytes arrived: stamp them and queue them for accounting."""
        now = _clock()
        self._items.append((self, now, data))
        if not self._inbox.scheduled:
            self._inbox.wake()

    def eof_received(self) -> bool:
        """The server closed its side: queued behind the bytes before it."""
        self.closed = True
        self._items.append((self, _clock(), b""))
        if not self._inbox.scheduled:
            self._inbox.wake()
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        """The connection is gone: queued behind everything before it."""
        self.closed = True
        self._items.append((self, _clock(), None))
        if not self._inbox.scheduled:
            self._inbox.wake()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport."""
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    # -- off the hot path (from the inbox) --------------------------------------------------
    def start(self, request: bytes, exchange: Exchange) -> None:
        """Write ``request``; ``exchange`` reads its response."""
        assert self.transport is not None and self.exchange is None
        self.exchange = exchange
        self.used += 1
        self.transport.write(request)

    def process(self, timestamp: float, data: bytes | None) -> None:
        """One queued read (``b""``: end of stream, ``None``: connection lost)."""
        exchange = self.exchange
        if exchange is None:
            if data:  # bytes nobody asked for: this connection cannot be trusted
                self.abort()
            return
        if data is None:
            exchange.lost(timestamp, reused=self.used > 1)
        elif data:
            exchange.feed(timestamp, data)
        else:
            exchange.eof(timestamp, reused=self.used > 1)

    def fail(self, exc: BaseException) -> None:
        """Accounting failed on this connection's bytes: fail the exchange, drop the line."""
        if self.exchange is not None:
            self.exchange.fail(exc)
        self.abort()

    def abort(self) -> None:
        """Close at once (cancel, timeout, protocol error): the server sees us go."""
        self.closed = True
        self.exchange = None
        if self.transport is not None:
            self.transport.abort()


#: Receives a 200 response's body: ``feed(timestamp, bytes)`` per read, ``finish(timestamp)``.
BodyFeed = Callable[[float, bytes], None]
BodyEnd = Callable[[float], None]


class Exchange:
    """Parses one HTTP/1.1 response and hands a 200's body to the accounting.

    Done when the body ends (chunked terminator, ``Content-Length``, or the connection's
    close for a body without either); then :attr:`done` holds the :class:`Response`,
    and ``on_idle`` gets the connection back when it may carry another exchange.
    """

    __slots__ = (
        "_buf",
        "_chunked",
        "_conn",
        "_excerpt",
        "_head",
        "_keep_alive",
        "_left",
        "_on_body",
        "_on_end",
        "_on_idle",
        "_sized",
        "_started",
        "done",
        "reason",
        "status",
    )

    def __init__(
        self,
        conn: Connection,
        on_body: BodyFeed,
        on_end: BodyEnd,
        on_idle: Callable[[Connection], None],
    ) -> None:
        self._conn = conn
        self._on_body = on_body
        self._on_end = on_end
        self._on_idle = on_idle
        self.done: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._buf = b""
        self._head = True
        self._started = False  # any byte of the response seen
        self.status = 0
        self.reason = ""
        self._chunked = False
        self._sized = False
        self._keep_alive = True
        self._left = 0  # chunked: bytes left in the chunk (-1: its CRLF); sized: body left
        self._excerpt = bytearray()

    # -- input --------------------------------------------------------------------------------
    def feed(self, timestamp: float, data: bytes) -> None:
        """Bytes of the response, which reached the client at ``timestamp``."""
        if self.done.done():
            return
        self._started = True
        if self._head:
            data = self._take_head(data)
            if self._head or self.done.done():
                return
            if not data and not self._sized and not self._chunked:
                return
        if self._chunked:
            self._dechunk(timestamp, data)
        elif self._sized:
            body, self._left = data[: self._left], self._left - min(len(data), self._left)
            self._body(timestamp, body)
            if self._left == 0:
                self._complete(timestamp)
        else:
            self._body(timestamp, data)

    def eof(self, timestamp: float, *, reused: bool) -> None:
        """The server closed: the end of a close-delimited body, else a failure."""
        if self.done.done():
            return
        if not self._head and not self._chunked and not self._sized:
            self._keep_alive = False
            self._complete(timestamp)
        else:
            self.lost(timestamp, reused=reused)

    def lost(self, timestamp: float, *, reused: bool) -> None:
        """The connection went away before the response was complete."""
        if self.done.done():
            return
        if not self._started and reused:
            self.fail(StaleConnection("the server had closed the kept-alive connection"))
        elif not self._head and not self._chunked and not self._sized:
            self._keep_alive = False
            self._complete(timestamp)
        else:
            self.fail(ServerDisconnected("Server disconnected"))

    def fail(self, exc: BaseException) -> None:
        """End the exchange with ``exc`` (the connection is not reused)."""
        self._keep_alive = False
        if not self.done.done():
            self.done.set_exception(exc)

    # -- parsing ------------------------------------------------------------------------------
    def _take_head(self, data: bytes) -> bytes:
        """Consume the status line and headers; returns the bytes after them."""
        buf = self._buf + data if self._buf else data
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEAD_BYTES:
                raise ProtocolError(f"response head longer than {MAX_HEAD_BYTES} bytes")
            self._buf = buf
            return b""
        self._buf = b""
        lines = buf[:end].split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        code, _, reason = rest.partition(b" ")
        if not version.startswith(b"HTTP/1.") or not code.isdigit():
            raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
        status = int(code)
        if 100 <= status < 200:  # an interim response: the real head follows
            return self._take_head(buf[end + 4 :])
        self._head = False
        self.status, self.reason = status, reason.decode("latin-1").strip()
        self._keep_alive = version == b"HTTP/1.1"
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == b"transfer-encoding":
                self._chunked = value.endswith(b"chunked")
            elif name == b"content-length" and value.isdigit():
                self._sized, self._left = True, int(value)
            elif name == b"connection":
                self._keep_alive = value != b"close" and (
                    value == b"keep-alive" or self._keep_alive
                )
        if self._chunked:
            self._sized, self._left = False, 0
        elif self._sized and self._left == 0:
            self._complete(_clock())
        return buf[end + 4 :]

    def _dechunk(self, timestamp: float, data: bytes) -> None:
        """HTTP/1.1 chunked transfer coding, incrementally; the payloads go to the body."""
        buf = self._buf + data if self._buf else data
        pos, end = 0, len(buf)
        pieces: list[bytes] = []
        left = self._left
        while pos < end:
            if left > 0:
                take = min(left, end - pos)
                pieces.append(buf[pos : pos + take])
                pos += take
                left -= take
                if left:
                    break
                left = -1
            if left == -1:  # the CRLF after a chunk's data
                if end - pos < 2:
                    break
                pos += 2
                left = 0
            line_end = buf.find(b"\r\n", pos)
            if line_end < 0:
                break
            size = int(buf[pos:line_end].split(b";", 1)[0], 16)
            if size == 0:  # the last chunk: wait for the trailers' end
                if buf.find(b"\r\n\r\n", line_end) < 0:
                    break
                self._buf = b""
                self._body(timestamp, b"".join(pieces))
                self._complete(timestamp)
                return
            pos = line_end + 2
            left = size
        self._buf = buf[pos:]
        self._left = left
        if len(self._buf) > MAX_HEAD_BYTES:
            raise ProtocolError("malformed chunked body (a size line never ended)")
        if pieces:
            self._body(timestamp, pieces[0] if len(pieces) == 1 else b"".join(pieces))

    def _body(self, timestamp: float, data: bytes) -> None:
        if not data:
            return
        if self.status == 200:
            self._on_body(timestamp, data)
        elif len(self._excerpt) < ERROR_BODY_EXCERPT:
            self._excerpt += data[: ERROR_BODY_EXCERPT - len(self._excerpt)]

    def _complete(self, timestamp: float) -> None:
        if self.done.done():
            return
        excerpt = ""
        if self.status == 200:
            self._on_end(timestamp)
        else:
            excerpt = self._excerpt.decode("utf-8", errors="replace")
        self.done.set_result(Response(self.status, self.reason, excerpt))
        conn = self._conn
        conn.exchange = None
        if self._keep_alive and not conn.closed:
            self._on_idle(conn)
        else:
            conn.abort()


class ConnectionPool:
    """Keep-alive connections to one target, opened on demand, never more than asked for.

    The runner's concurrency cap bounds how many are open at once (bench serve's connector
    limit). Must be created inside a running event loop.
    """

    def __init__(self, target: HttpTarget) -> None:
        self.target = target
        self._loop = asyncio.get_running_loop()
        self._inbox = Inbox(self._loop)
        self._idle: list[Connection] = []
        self._open: set[Connection] = set()
        self._ssl: ssl.SSLContext | None = ssl.create_default_context() if target.tls else None

    async def connect(self) -> Connection:
        """A new connection."""
        target = self.target
        _, conn = await self._loop.create_connection(
            lambda: Connection(self._inbox),
            target.host,
            target.port,
            ssl=self._ssl,
            server_hostname=target.host if self._ssl else None,
        )
        self._open.add(conn)
        return conn

    async def acquire(self) -> Connection:
        """An idle kept-alive connection, or a new one."""
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
            self._open.discard(conn)
        return await self.connect()

    async def fill(self, count: int, batch: int = 64) -> int:
        """Open connections until ``count`` are idle (``batch`` at a time); how many opened.

        A connection that cannot be opened is skipped: the request that needs it will
        open its own and report what went wrong.
        """
        opened = 0
        while (missing := count - len(self._idle)) > 0:
            results = await asyncio.gather(
                *(self.connect() for _ in range(min(batch, missing))), return_exceptions=True
            )
            fresh = [c for c in results if isinstance(c, Connection)]
            self._idle.extend(fresh)
            opened += len(fresh)
            if len(fresh) < len(results):
                break  # the server refuses more: stop asking
        return opened

    def exchange(self, conn: Connection, on_body: BodyFeed, on_end: BodyEnd) -> Exchange:
        """An exchange on ``conn`` that gives the connection back when it is done."""
        return Exchange(conn, on_body, on_end, self._release)

    def _release(self, conn: Connection) -> None:
        self._idle.append(conn)

    def discard(self, conn: Connection) -> None:
        """Abort ``conn`` and forget it."""
        conn.abort()
        self._open.discard(conn)
        with contextlib.suppress(ValueError):
            self._idle.remove(conn)

    async def aclose(self) -> None:
        """Abort every connection."""
        for conn in list(self._open):
            conn.abort()
        self._open.clear()
        self._idle.clear()
