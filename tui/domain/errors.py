"""One error shape for everything the operator can get wrong or the machine can refuse.

Every error vtc raises on purpose derives from :class:`VtcError`: a one-line message in
the operator's terms (what was wrong, with the value), and optionally a hint (what to do).
The CLI prints ``vtc: <message> (<hint>)`` on one line and exits 2; the console shows the
same line in a notification. Anything else that escapes is a bug, and is shown as one.
"""

from __future__ import annotations

MAX_CHARS = 1000
"""The most of a message or hint that is ever shown (a cut is marked with an ellipsis)."""


def _head(text: str) -> str:
    """``text`` on one line, cut to :data:`MAX_CHARS` with an ellipsis (only its head is
    looked at: a message may quote a mebibyte of someone else's text)."""
    line = " ".join(text[: MAX_CHARS + 1].split())
    return line if len(line) <= MAX_CHARS else line[: MAX_CHARS - 1] + "…"


class VtcError(Exception):
    """Base of vtc's own errors: a one-line user message and an optional hint."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        # One line, whatever the caller passed: a multi-line message breaks the CLI's
        # contract and the console's notification layout. Only the head is looked at (a
        # message may quote a huge input).
        self.message = _head(str(message)) or type(self).__name__
        self.hint = _head(hint) if hint else None
        super().__init__(self.message)

    def one_line(self) -> str:
        """``message`` and, when there is one, ``(hint)``: what the CLI and the console show."""
        return f"{self.message} ({self.hint})" if self.hint else self.message

    def __str__(self) -> str:
        return self.one_line()


class BusyError(VtcError):
    """A file another process holds locked (the run history): the same action may be retried.

    The console names the key that retries it after the one line (:func:`retry_line`).
    """


def retry_line(exc: BaseException, key: str) -> str:
    """:func:`one_line` of ``exc``; for a :class:`BusyError`, its message and which key
    tries again (the key stands in for the hint: the line must fit a toast)."""
    if isinstance(exc, BusyError) and key:
        return f"{exc.message} · {key} retries"
    return one_line(exc)


def one_line(exc: BaseException, *, limit: int = 300) -> str:
    """A single line describing ``exc``: a :class:`VtcError`'s own line, else type and text.

    Used where an unexpected exception must still reach the operator as one line (a
    worker's failure in the console, a headless command's last resort), cut at ``limit``.
    """
    if isinstance(exc, VtcError):
        text = exc.one_line()
    else:
        detail = " ".join(str(exc).split())
        text = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
