"""Quantization refused: not the checkpoint's method, an unknown name, or the wrong platform.

Texts (``config/model.py:1443-1456`` in 0.32; ``config.py`` in 0.4-0.9, same words):
``Quantization method specified in the model config (A) does not match the quantization method
specified in the `quantization` argument (B).``, ``Unknown quantization method: X. Must be one
of [...]`` and ``X quantization is currently not supported in ROCm.``
(``platforms/interface.py:1146-1149``). An unknown method is never answered with itself: the
suggestion comes from the list the log itself gives, without the rejected name (a method the
console knows may not exist in the vLLM that refused it).
"""

from __future__ import annotations

import ast
import difflib
from typing import Final

from tui.domain.diagnosis import Diagnosis, Fix
from tui.domain.flags.serve import QUANTIZATION_METHODS
from tui.server.diagnose.common import make
from tui.server.diagnose.reading import LogView, tolerant

_UNKNOWN_QUANT: Final = tolerant(
    r"Unknown quantization method: (?P<q>[^\s.]{1,60}(?:\.[^\s.]{1,60})*)\. Must be one of "
    r"(?P<list>\[[^\]]{0,4000}\])?",
    "Unknown quantization method",
)
_QUANT_MISMATCH: Final = tolerant(
    r"Quantization method specified in the model config \((?P<ckpt>[^)]{1,60})\) does not match "
    r"the quantization method specified in the `quantization` argument \((?P<arg>[^)]{1,60})\)",
    "does not match the quantization method",
)
_QUANT_PLATFORM: Final = tolerant(
    r"(?P<q>[\w-]{1,40}) quantization is currently not supported in (?P<device>[^.]{1,60})\.",
    "quantization is currently not supported",
)
_UNSET: Final = Fix(title="Unset --quantization", set={"quantization": None})


def _listed(text: str | None) -> list[str]:
    if not text:
        return list(QUANTIZATION_METHODS)
    try:
        value = ast.literal_eval(" ".join(text.split()))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return [p.strip(" '\"") for p in text.strip("[]").split(",") if p.strip(" '\"")]
    return (
        [str(v) for v in value] if isinstance(value, list | tuple) else list(QUANTIZATION_METHODS)
    )


def _mismatch(log: LogView) -> Diagnosis | None:
    found = log.find(_QUANT_MISMATCH, "does not match the quantization method")
    if not found:
        return None
    m, evidence = found
    ckpt, arg = m.group("ckpt").strip(), m.group("arg").strip()
    return make(
        log,
        "unknown_quantization",
        f"--quantization {arg} does not match the checkpoint's {ckpt}",
        evidence,
        {"quantization": arg, "checkpoint_quantization": ckpt},
        [
            Fix(title=f"Use the checkpoint's quantization ({ckpt})", set={"quantization": ckpt}),
            Fix(title="Unset --quantization (use the checkpoint's)", set={"quantization": None}),
        ],
    )


def unknown_quantization(log: LogView) -> Diagnosis | None:
    """The quantization method is not the checkpoint's, not known, or not for this platform."""
    found_mismatch = _mismatch(log)
    if found_mismatch is not None:
        return found_mismatch
    found = log.find(_UNKNOWN_QUANT, "Unknown quantization method")
    if found:
        m, evidence = found
        q = m.group("q")
        listed = [c for c in _listed(m.group("list")) if c != q]
        fixes = [
            Fix(title=f"Use --quantization {c}", set={"quantization": c})
            for c in difflib.get_close_matches(q, listed, 1, 0.6)
        ]
        fixes.append(_UNSET)
        return make(
            log,
            "unknown_quantization",
            f"unknown quantization method '{q}'",
            evidence,
            {"quantization": q},
            fixes,
        )
    found = log.find(_QUANT_PLATFORM, "quantization is currently not supported")
    if found:
        m, evidence = found
        q, device = m.group("q"), m.group("device").strip()
        return make(
            log,
            "unknown_quantization",
            f"{q} quantization is not supported on {device}",
            evidence,
            {"quantization": q, "platform": device},
            [_UNSET],
        )
    return None
