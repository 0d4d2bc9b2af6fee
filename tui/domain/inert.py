"""Text from outside made inert before a terminal shows it: one sanitiser for every string.

A server's log line, a model id from ``/v1/models``, a metric label, an error body, a preset's
name or a file name may hold terminal control sequences: an OSC 52 clipboard write
(``ESC ] 52 ; c ; <base64> BEL``), an OSC 0 title, a DCS/APC/PM/SOS string, a CSI that moves
the cursor or clears the screen, or their 8-bit C1 forms (``\\x9b`` for CSI, ``\\x9d`` for
OSC). Passed raw to a terminal, these act on the operator's machine, over SSH too.

:func:`inert` removes every escape sequence whole (so no payload is left to be read as text
or half a sequence to be completed by the next write), then every remaining C0/C1 control
and DEL; tabs and newlines stay only where the caller allows them. The Unicode bidirectional
overrides go too (they reorder what the operator reads). Markup is a separate matter for
the UI layer: it shows these strings as Text/Content objects or escapes them with
``rich.markup.escape``. Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Final

# A control string (OSC, DCS, SOS, PM, APC; 7-bit ESC x or 8-bit C1 introducer) runs to its
# terminator: ST (ESC \ or 0x9c) or BEL (xterm accepts BEL for OSC; taken for all, harmless);
# an unterminated one runs to the end of the text, so its payload never reaches the screen.
_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c|$)"
# CSI: ESC [ or 0x9b, parameter bytes, intermediate bytes, one final byte (ECMA-48 5.4).
_CSI = r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
# Any other escape: ESC, intermediates, one final byte (nF/Fp/Fe/Fs forms), or a lone ESC.
_ESC = r"\x1b[ -/]*[0-~]?"
_SEQUENCE: Final = re.compile(f"{_STRING}|{_CSI}|{_ESC}")
# What stays after the sequences are gone and must still go: C0 but tab/newline, DEL, C1,
# and the bidi embeddings/overrides/isolates (U+202A-202E, U+2066-2069).
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_LINE_BREAKS: Final = re.compile(r"\r\n|[\r\u2028\u2029]")


def inert(text: str, *, tabs: bool = False, newlines: bool = False) -> str:
    """``text`` with every escape sequence and control character removed.

    ``tabs``/``newlines`` keep those two where the caller shows several lines or aligned
    columns; otherwise each becomes one space, so words stay apart. A carriage return is a
    line break (``\\r\\n`` one break), never a return to the line's start.
    """
    if text.isprintable():  # the common case: nothing to do (a tab or newline is not printable)
        return text
    cleaned = _SEQUENCE.sub("", text)
    cleaned = _LINE_BREAKS.sub("\n", cleaned)
    cleaned = _CONTROL.sub("", cleaned)
    if not tabs:
        cleaned = cleaned.replace("\t", " ")
    if not newlines:
        cleaned = cleaned.replace("\n", " ")
    return cleaned


def inert_lines(text: str) -> str:
    """``text`` made inert keeping tabs and newlines (a log excerpt, a command's output)."""
    return inert(text, tabs=True, newlines=True)


def is_inert(text: str, *, tabs: bool = False, newlines: bool = False) -> bool:
    """Whether ``text`` holds no escape and no control but those allowed (for checks)."""
    return inert(text, tabs=tabs, newlines=newlines) == text


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, an ellipsis marking a cut."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"
