"""vLLM's human-readable integers (``20G``, ``32k``, ``auto``).

Mirrors ``utils/argparse_utils.py:29-93`` of vLLM 0.32.0 (reference section 1.1): lower-case
suffixes ``k/m/g/t`` are decimal, upper-case ``K/M/G/T`` are binary, and a decimal number with
a binary suffix is rejected. Where vLLM itself would crash (a number so long that
``float(number) * 1000`` is infinite raises ``OverflowError`` there) these functions refuse
the value with a ``ValueError`` instead.
"""

from __future__ import annotations

import re

_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SUFFIXED = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")


class HumanIntError(ValueError):
    """A refusal with its own words (argparse prints them after ``argument --x:``)."""


def parse_human_int(text: str, type_name: str = "human_readable_int") -> int:
    """Parse ``text`` the way vLLM's ``human_readable_int`` does.

    Raises ``ValueError`` for text that is no number (argparse then says "invalid
    human_readable_int value"), :class:`HumanIntError` with vLLM's wording for decimals with
    a binary suffix, and :class:`HumanIntError` for a number too large to represent.
    """
    value = text.strip()
    match = _SUFFIXED.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            try:
                return int(float(number) * _DECIMAL[suffix])
            except OverflowError:  # float(number) is inf for hundreds of digits
                raise HumanIntError(
                    f"invalid {type_name} value: {_cut(text)!r} (too large)"
                ) from None
        if "." in number:
            raise HumanIntError(
                f"Decimals are not allowed with binary suffixes like {suffix}. "
                f"Did you mean to use {number}{suffix.lower()} instead?"
            )
        return int(number) * _BINARY[suffix]
    return int(value)


def parse_human_int_or_auto(text: str) -> int:
    """``human_readable_int_or_auto``: also accepts ``auto`` and ``-1`` (auto-fit)."""
    value = text.strip()
    if value == "-1" or value.lower() == "auto":
        return -1
    return parse_human_int(text, "human_readable_int_or_auto")


def format_human_bytes(n: int) -> str:
    """Render a byte count the shortest exact way vLLM accepts back (``64M``, ``1G``)."""
    for suffix, mult in (("T", 2**40), ("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n and n % mult == 0:
            return f"{n // mult}{suffix}"
    return str(n)


def _cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
