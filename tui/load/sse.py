"""Server-sent events as vLLM streams them, split on bytes without decoding.

:class:`SseParser` turns a byte stream into ``data:`` payloads. Its :meth:`~SseParser.scan`
is what the accounting of each response runs on every read: in the usual case (every
completed event one ``data: `` line holding a token chunk) it is a handful of C-level byte
operations whatever the number of events in the read.

The parser holds at most one unfinished event: an event that grows past
:data:`MAX_EVENT_BYTES` without ending raises :class:`SseError` (a server that never
ends its events cannot grow the client's memory).
"""

from __future__ import annotations


class SseError(ValueError):
    """A stream that is not server-sent events as vLLM writes them."""


#: The longest unfinished event held (vLLM's chunks are a few hundred bytes).
MAX_EVENT_BYTES = 1024 * 1024

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
            if len(text) > MAX_EVENT_BYTES:
                raise SseError(
                    f"an event grew past {MAX_EVENT_BYTES // (1024 * 1024)} MiB without ending"
                )
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
