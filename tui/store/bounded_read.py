"""The one reader of files from outside: profiles, journals, presets, logs, result files.

Every file vtc did not just write itself in this process is untrusted: another user's
profile, a journal torn by a kill, a preset in a shared folder, a FIFO named like a log.
This module reads them all the same way and raises only :class:`UntrustedFileError` (a
``VtcError``: one line naming the file) for anything it refuses:

- not a regular file (FIFO, device, socket, folder) or missing: refused at open, never waited
  on (:func:`tui.store.regular_file.open_regular` opens with ``O_NONBLOCK``);
- larger than the caller's bound (read to the bound plus one byte, never further);
- not UTF-8 (the byte offset named);
- JSON nested deeper than the bound: measured *before* parsing and without recursion
  (Python's ``json`` recurses per level; 200,000 ``[`` is a ``RecursionError`` there);
- JSON holding ``NaN``/``Infinity`` (not JSON, RFC 8259 section 6), a float that overflows to
  infinity (``1e400``), or an integer over 64 bits: no number from a file is non-finite
  or implausibly large.

:func:`read_json_lines` reads a journal in whole records: a last line without its newline
(a write cut by a kill) is reported as ``torn_at`` (the byte offset to cut the file to
before appending) and never parsed.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tui.domain.errors import VtcError
from tui.store.regular_file import open_regular, read_regular_bytes

MAX_DEPTH = 64
"""JSON nesting a file of vtc's may have (a profile is 6 deep; a result file 4)."""
MAX_INT = 2**63
"""The largest integer magnitude a file may hold."""
DEFAULT_MAX_BYTES = 64 * 2**20

# A JSON string, unrolled so the regex never backtracks: its brackets are not nesting.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")


class UntrustedFileError(VtcError):
    """A file from outside that vtc will not use (one line: which file, and why)."""


def _refuse(what: str, path: str | os.PathLike[str], why: str) -> UntrustedFileError:
    name = os.fspath(path)
    if len(name) > 200:
        name = name[:199] + "…"
    return UntrustedFileError(f"cannot read {what} {name!r}: {why}")


def read_bytes(
    path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES, what: str = "file"
) -> bytes:
    """The bytes of the regular file ``path``, refused when over ``max_bytes``."""
    try:
        raw = read_regular_bytes(path, max_bytes + 1)
    except FileNotFoundError:
        raise _refuse(what, path, "no such file") from None
    except OSError as exc:
        raise _refuse(what, path, exc.strerror or type(exc).__name__) from None
    except ValueError as exc:  # a NUL in the path
        raise _refuse(what, path, str(exc)) from None
    if len(raw) > max_bytes:
        raise _refuse(what, path, f"larger than {max_bytes:,} bytes")
    return raw


def decode_text(raw: bytes, path: str | os.PathLike[str], what: str = "file") -> str:
    """``raw`` as UTF-8, refused (the first bad byte named) when it is not."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refuse(what, path, f"not UTF-8 text (byte {exc.start})") from None


def read_text(
    path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES, what: str = "file"
) -> str:
    """The regular file ``path`` as UTF-8 text, bounded (see the module docstring)."""
    return decode_text(read_bytes(path, max_bytes=max_bytes, what=what), path, what)


def json_depth(raw: bytes | str) -> int:
    """How deep ``raw``'s arrays and objects nest, counted without recursion.

    Strings are taken out first (their brackets are text); what is left is a bracket
    sequence whose running sum's peak is the depth. Malformed input gives some number, and
    the parse that follows refuses it.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    brackets = np.frombuffer(_NOT_BRACKET.sub(b"", _STRING.sub(b"", data)), dtype=np.uint8)
    if not brackets.size:
        return 0
    steps = np.where((brackets == ord("[")) | (brackets == ord("{")), 1, -1)
    return max(0, int(np.cumsum(steps).max()))


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def _int(text: str) -> int:
    if len(text) > 20:
        raise ValueError(f"number {text[:40]}… is out of range")
    value = int(text)
    if abs(value) > MAX_INT:
        raise ValueError(f"number {text} is out of range")
    return value


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _constant_kept(name: str) -> float:
    return float(name.replace("Infinity", "inf"))


def parse_json(text: str | bytes, *, max_depth: int | None = MAX_DEPTH, finite: bool = True) -> Any:
    """``text`` as strict JSON (finite numbers, bounded depth); ``ValueError`` otherwise.

    Also the parser of JSON a server sends (a ``/version`` body): the caller wraps the one
    ``ValueError`` into its own one-line error. ``max_depth`` ``None``: no scan before
    parsing (a dataset of hundreds of MiB); a nesting past the parser's own limit is then
    the same ``ValueError``. ``finite`` ``False``: ``NaN``/``Infinity`` read as Python
    writes them (a journal vtc wrote itself with ``json.dumps``: ``request_rate`` inf).
    """
    depth = json_depth(text) if max_depth is not None else 0
    if max_depth is not None and depth > max_depth:
        raise ValueError(f"nested {depth} levels deep (at most {max_depth})")
    try:
        if not finite:
            return json.loads(text, parse_int=_int, parse_constant=_constant_kept)
        return json.loads(text, parse_float=_float, parse_int=_int, parse_constant=_constant)
    except RecursionError:  # only without the scan (max_depth None)
        raise ValueError("nested too deep") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start})") from None


def read_json(
    path: str | os.PathLike[str],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int | None = MAX_DEPTH,
    what: str = "file",
) -> Any:
    """The JSON value in ``path``, or :class:`UntrustedFileError` with one line."""
    text = read_text(path, max_bytes=max_bytes, what=what)
    try:
        return parse_json(text, max_depth=max_depth)
    except ValueError as exc:
        detail = " ".join(str(exc).split())[:200]
        raise _refuse(what, path, f"not valid JSON: {detail}") from None


def json_object(value: Any, what: str) -> dict[str, Any]:
    """``value`` if it is a JSON object, else ``ValueError`` naming what it is instead."""
    if not isinstance(value, dict):
        raise ValueError(f"{what} is a JSON {type(value).__name__}, not an object")
    return value


@dataclass(frozen=True)
class JsonLines:
    """A journal's whole records, and where a torn last line starts (``None``: none)."""

    records: list[Any] = field(default_factory=list)
    bad_lines: int = 0  # whole lines that are not JSON (kept out of ``records``)
    torn_at: int | None = None  # byte offset of a last line without its newline


def read_json_lines(
    path: str | os.PathLike[str],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    what: str = "journal",
    finite: bool = True,
) -> JsonLines:
    """The records of the JSON-lines file ``path``: one per newline-terminated line
    (``finite``: as :func:`parse_json`)."""
    raw = read_bytes(path, max_bytes=max_bytes, what=what)
    end = raw.rfind(b"\n") + 1
    torn_at = end if end < len(raw) else None
    records: list[Any] = []
    bad = 0
    for line in raw[:end].splitlines():
        if not line.strip():
            continue
        try:
            records.append(parse_json(line, max_depth=max_depth, finite=finite))
        except ValueError:
            bad += 1
    return JsonLines(records, bad, torn_at)


def cut_torn_tail(path: str | os.PathLike[str], what: str = "journal") -> int | None:
    """Truncate ``path`` after its last whole record; the offset cut at (``None``: whole)."""
    lines = read_json_lines(path, what=what)
    if lines.torn_at is not None:
        os.truncate(path, lines.torn_at)
    return lines.torn_at


def require_regular_file(path: str | os.PathLike[str], what: str = "file") -> None:
    """Refuse now, with one line, a ``path`` that is missing or not a regular file.

    For a file named on a command line and read later (a server's log): a FIFO given as
    ``--attach-log`` must be refused before anything waits on it.
    """
    try:
        with open_regular(path):
            pass
    except FileNotFoundError:
        raise _refuse(what, path, "no such file") from None
    except OSError as exc:
        raise _refuse(what, path, exc.strerror or type(exc).__name__) from None
    except ValueError as exc:
        raise _refuse(what, path, str(exc)) from None
