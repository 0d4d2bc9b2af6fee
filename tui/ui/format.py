"""Short renderings for the panels: numbers, N/A, bars. Display only, no decisions."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import wraps
from typing import ParamSpec

from rich.markup import escape
from textual.content import Content

from tui.domain.inert import inert, is_inert

P = ParamSpec("P")

NA = "N/A"
GIB = 1024**3


def na(value: float | None, spec: str = ".1f", suffix: str = "") -> str:
    """``value`` formatted with ``spec``, or ``N/A`` when the source could not tell."""
    if value is None:
        return NA
    return f"{value:{spec}}{suffix}"


def percent(fraction: float | None, digits: int = 1) -> str:
    """A 0-1 fraction as a percentage (``0.431`` -> ``43.1%``)."""
    if fraction is None:
        return NA
    return f"{fraction * 100:.{digits}f}%"


def gib(n_bytes: int | float | None) -> str:
    """Bytes in GiB with one decimal, no unit (``9.6``)."""
    if n_bytes is None:
        return NA
    return f"{n_bytes / GIB:.1f}"


def gib0(n_bytes: int | float | None) -> str:
    """Bytes in whole GiB (``32``), for tight lines."""
    if n_bytes is None:
        return NA
    return f"{n_bytes / GIB:.0f}"


def tokens(n: int | float | None) -> str:
    """A token count with thousands separators (``10,944``)."""
    if n is None:
        return NA
    return f"{int(n):,}"


def bar(fraction: float | None, width: int) -> str:
    """A text gauge ``width`` cells wide; blank-ish when the fraction is unknown."""
    width = max(width, 1)
    if fraction is None:
        return "?" * width
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return "█" * filled + "░" * (width - filled)


def seconds(value: float | None) -> str:
    """Seconds with one decimal (``41.2s``)."""
    if value is None:
        return NA
    return f"{value:.1f}s"


def signed_percent(value: float) -> str:
    """A relative change with its sign (``+12.3%``, ``-4.0%``)."""
    return f"{value:+.1f}%"


def plain(text: str) -> str:
    """Text from outside (a model id, a URL, a run's label) for a markup string (a border
    title): escapes and controls removed, ``[`` escaped so it shows as itself."""
    return escape(inert(text))


def inert_content(content: Content) -> Content:
    """``content`` as it is, or, when it holds an escape or control (text from outside), its
    text made inert (styles dropped: rare, and the text is what matters)."""
    plain = content.plain
    if is_inert(plain, tabs=True, newlines=True):
        return content
    return Content(inert(plain, tabs=True, newlines=True))


def inert_rendering(render: Callable[P, Content]) -> Callable[P, Content]:
    """``render`` whose result is passed through :func:`inert_content` (a panel or card
    that shows records, log-derived causes, model ids or server messages)."""

    @wraps(render)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> Content:
        return inert_content(render(*args, **kwargs))

    return wrapper


_ID_BREAKS = re.compile(r"(?<=[/\-_=.,:])")


def wrap_id(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` cells, broken at its blanks, and a word longer
    than a line (a model id, a path, a JSON value) after its ``/``, ``-``, ``_``, ``=``, ``.``,
    ``,`` or ``:``, never mid-name unless a piece alone is longer than the line."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        pieces = [word] if len(word) <= width else [p for p in _ID_BREAKS.split(word) if p]
        for i, piece in enumerate(pieces):
            glue = " " if line and i == 0 else ""
            if len(line) + len(glue) + len(piece) <= width:
                line += glue + piece
                continue
            if line:
                lines.append(line)
            while len(piece) > width:  # one piece longer than a line: cut, nothing else fits
                lines.append(piece[:width])
                piece = piece[width:]
            line = piece
    if line:
        lines.append(line)
    return lines
