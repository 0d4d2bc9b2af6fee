"""vLLM's human-readable integers (``20G``, ``32k``, ``auto``).

Mirrors ``utils/argparse_utils.py:29-93`` of vLLM 0.32.0 (reference section 1.1): lower-case
suffixes ``k/m/g/t`` are decimal, upper-case ``K/M/G/T`` are binary, and a decimal number with
a binary suffix is rejected.
"""

from __future__ import annotations

import re

_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SUFFIXED = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")


def parse_human_int(text: str) -> int:
    """Parse ``text`` the way vLLM's ``human_readable_int`` does.

    Raises ``ValueError`` with vLLM's wording for decimals with a binary suffix.
    """
    value = text.strip()
    match = _SUFFIXED.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        try:
            return int(number) * _BINARY[suffix]
        except ValueError as exc:
            raise ValueError(
                f"Decimals are not allowed with binary suffixes like {suffix}. "
                f"Did you mean to use {number}{suffix.lower()} instead?"
            ) from exc
    return int(value)


def parse_human_int_or_auto(text: str) -> int:
    """``human_readable_int_or_auto``: also accepts ``auto`` and ``-1`` (auto-fit)."""
    if text.strip().lower() == "auto":
        return -1
    return parse_human_int(text)


def format_human_bytes(n: int) -> str:
    """Render a byte count the shortest exact way vLLM accepts back (``64M``, ``1G``)."""
    for suffix, mult in (("T", 2**40), ("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n and n % mult == 0:
            return f"{n // mult}{suffix}"
    return str(n)
