"""argparse types for vtc's numeric options: checked at parse time, in every mode.

An option checked only where one mode uses it (``--ray-gpus -3`` without ``--ray``,
``--sim-speed nan`` in a sweep, ``--budget inf`` in a calibration) used to pass in the
others and fail late, or not at all. Each numeric option takes one of these types, so a
bad value is argparse's one line and exit 2 whatever else the command line says.
"""

from __future__ import annotations

import argparse
import math

from tui.domain.inert import inert
from tui.server.attached import attach_url


def _shown(text: str) -> str:
    return repr(inert(text)[:40])


def positive_float(text: str) -> float:
    """``text`` as a finite number above 0 (``nan``, ``inf``, 0 and negatives refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {_shown(text)}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {_shown(text)}")
    return value


def positive_int(text: str) -> int:
    """``text`` as a whole number above 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {_shown(text)}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a whole number above 0, got {_shown(text)}")
    return value


def nonnegative_float(text: str) -> float:
    """``text`` as a finite number, 0 or more (``nan``, ``inf`` and negatives refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {_shown(text)}") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number, 0 or more, got {_shown(text)}")
    return value


def server_url(text: str) -> str:
    """``text`` unchanged (its credentials kept for the caller to split) when it is a
    server's base URL (``http://host:8000``); refused at parse time otherwise."""
    try:
        attach_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--attach needs ")) from None
    return text


def absolute_path(text: str) -> str:
    """``text`` when it is an absolute path free of control characters (a systemd unit's
    ``ExecStart`` takes no relative one); refused at parse time otherwise."""
    if not text.startswith("/") or inert(text) != text:
        raise argparse.ArgumentTypeError(f"must be an absolute path, got {_shown(text)}")
    return text


def gpu_indices(text: str) -> str:
    """``text`` as a list of distinct GPU indices (``0,1,2``), normalised; refused at parse
    time when an entry is not a whole number 0 or more, or repeats."""
    entries = [entry.strip() for entry in text.split(",")]
    if not all(entry.isdigit() and entry.isascii() for entry in entries):
        raise argparse.ArgumentTypeError(f"GPU indices like 0,1,2, got {_shown(text)}")
    if len(set(map(int, entries))) != len(entries):
        raise argparse.ArgumentTypeError(f"a GPU named twice in {_shown(text)}")
    return ",".join(entries)


def sim_gpu(text: str) -> str:
    """``text`` when the simulator knows that GPU (`vtc-sim gpus`); refused at parse time
    otherwise, so no mode falls back to another GPU in silence."""
    from tui.sim.catalog import UnknownGpuError, resolve_gpu  # the simulator, only when named

    try:
        resolve_gpu(text)
    except UnknownGpuError as exc:
        raise argparse.ArgumentTypeError(inert(str(exc))[:300]) from None
    return text
