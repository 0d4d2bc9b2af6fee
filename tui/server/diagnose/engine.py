"""The engine died, or timed out, or something unknown happened: wrappers and root exceptions.

After any EngineCore failure the API server raises a wrapper that points back up the log:
``Engine core initialization failed. See root cause above.`` (V1 from 0.6.6; ``Failed core
proc(s): {...}`` appended from 0.9), ``Engine process failed to start. See stack trace for
the root cause.`` (the V0 multiprocessing front end, 0.6-0.10). The root cause is an
exception printed *above* it. A pasted log that keeps only the wrapper is reported as
``engine_died`` saying that the lines above it are missing.
"""

from __future__ import annotations

import re
import signal
from typing import Any, Final

from tui.domain.diagnosis import Diagnosis
from tui.server.diagnose.common import make
from tui.server.diagnose.config import pydantic_blocks
from tui.server.diagnose.reading import LogView, tolerant

CPU_ATTENTION_HEAD_SIZES: Final = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
"""Head sizes the CPU attention kernels support (vllm-cpu-findings.md)."""

_CPU_ATTN: Final = tolerant(
    r"Unsupported CPU attention configuration: head_dim=(?P<hd>\d+)", "Unsupported CPU attention"
)


def unsupported_cpu_attention(log: LogView) -> Diagnosis | None:
    """The CPU attention kernels have no head size for the model (fails on the first request)."""
    found = log.find(_CPU_ATTN, "Unsupported CPU attention")
    if not found:
        return None
    hd = int(found[0].group("hd"))
    sizes = ", ".join(str(s) for s in CPU_ATTENTION_HEAD_SIZES)
    return make(
        log,
        "engine_died",
        f"the engine died on its first request: CPU attention does not support head_dim={hd} "
        f"(supported: {sizes}); this model cannot run on the CPU backend",
        found[1],
        {"head_dim": hd, "supported_head_dims": list(CPU_ATTENTION_HEAD_SIZES)},
    )


_PROFILING_ERROR: Final = tolerant(
    r"Error in memory profiling\. Initial free memory (?P<init>[\d.]+) GiB, current free memory "
    r"(?P<cur>[\d.]+) GiB",
    "Error in memory profiling",
)
_ENGINE_TIMEOUT: Final = tolerant(
    r"Timed out waiting for engine core processes to start.{0,300}?Waited (?P<s>\d+)s",
    "Timed out waiting for engine core",
)


def profiling_or_engine_timeout(log: LogView) -> Diagnosis | None:
    """Free memory moved while vLLM profiled; the engine took too long to start."""
    found = log.find(_PROFILING_ERROR, "Error in memory profiling")
    if found:
        m, evidence = found
        init, cur = float(m.group("init")), float(m.group("cur"))
        return make(
            log,
            "unknown",
            f"memory profiling failed: free GPU memory changed from {init} to {cur} GiB while "
            "vLLM profiled; another process on the GPU released or took memory",
            evidence,
            {"initial_free_gib": init, "current_free_gib": cur},
        )
    found = log.find(_ENGINE_TIMEOUT, "Timed out waiting for engine core")
    if found:
        m, evidence = found
        waited = int(m.group("s"))
        return make(
            log,
            "unknown",
            f"the engine did not start within {waited} s (VLLM_ENGINE_READY_TIMEOUT_S); slow "
            "weight loading is the usual cause",
            evidence,
            {"waited_s": waited},
        )
    return None


_ENGINE_DEAD: Final = tolerant(
    r"EngineDeadError|EngineCore encountered a fatal error|Engine core process \S{1,40} died "
    r"unexpectedly|EngineCore encountered an issue",
    "EngineDeadError",
    "EngineCore encountered",
    "died unexpectedly",
)
_WORKER_FAILED: Final = re.compile(r"Worker failed with error '(?P<err>.+?)'(?:, please check|$)")
_HTTP_500: Final = tolerant(r'" 500 Internal Server Error', "500 Internal Server Error")
_EXCEPTION: Final = re.compile(
    r"^(?:[\w.]+\.)?(?P<type>[A-Z]\w*(?:Error|Exception|Exit)): (?P<msg>.+)$"
)
_WRAPPERS: Final = re.compile(
    r"Engine core initialization failed|WorkerProc initialization failed|Worker failed with "
    r"error|EngineCore encountered an issue|See stack trace|EngineCore failed to start|"
    r"Engine process failed to start|See root cause above"
)
_WRAPPER: Final = tolerant(
    r"Engine core initialization failed\. See root cause above|Engine process failed to start\. "
    r"See stack trace for the root cause|EngineCore failed to start",
    "Engine core initialization failed",
    "Engine process failed to start",
    "EngineCore failed to start",
)
_TRACEBACK: Final = re.compile(r"Traceback \(most recent call last\)")


def _wrapper_starts(log: LogView) -> list[int]:
    return [m.start() for m, _, _ in log.find_all(_WRAPPER)]


def _is_wrapper(log: LogView, index: int, message: str, starts: list[int]) -> bool:
    """A wrapper line, even one cut by an unrecognised wrap (its text runs on below it)."""
    if _WRAPPERS.search(message):
        return True
    begin = log.logical_start[index]
    return any(begin <= s <= begin + len(message) for s in starts)


def root_exception(log: LogView) -> tuple[str, str] | None:
    """The first exception line that is not a known wrapper: (text, evidence)."""
    starts = _wrapper_starts(log)
    for i, message in enumerate(log.logical):
        m = _EXCEPTION.match(message.strip())
        if m and not _is_wrapper(log, i, message, starts) and "Errno 24" not in message:
            text = f"{m.group('type')}: {m.group('msg')}"
            if "validation error" in message:  # say what the pydantic block says
                for _, errors, _ in pydantic_blocks(log):
                    if errors:
                        text = f"{m.group('type')}: {errors[0].message}"
                        break
            return (text if len(text) <= 500 else text[:499] + "…"), log.logical_raw[i]
    found = next(log.find_line(_WORKER_FAILED, "Worker failed with error"), None)
    if found:
        return found[0].group("err"), found[1]
    return None


def engine_died(log: LogView) -> Diagnosis | None:
    """The engine died while serving (or on its first request)."""
    found = log.find(_ENGINE_DEAD)
    if found is None and log.exit_code == 0:
        found = log.find(_HTTP_500, "500 Internal Server Error")
    if found is None:
        return None
    root = root_exception(log)
    cause = f": {root[0]}" if root else ""
    facts: dict[str, Any] = {}
    if root:
        facts["error"] = root[0]
    return make(
        log,
        "engine_died",
        f"the engine died while serving{cause}",
        root[1] if root else found[1],
        facts,
    )


def wrapper_only(log: LogView) -> Diagnosis | None:
    """Only the API server's wrapper is left: the root cause was above it, and is missing."""
    found = log.find(_WRAPPER)
    if found is None or root_exception(log) is not None:
        return None
    return make(
        log,
        "engine_died",
        "the engine core failed to start, but the root-cause lines above the wrapper "
        f"('{' '.join(found[0].group(0).split())}') are missing from this log: the EngineCore "
        "process's own traceback, printed before it, names the cause",
        found[1],
        {"root_cause_missing": True},
    )


def failure_found(log: LogView) -> bool:
    """Whether the log (or the exit) shows any failure at all."""
    if log.exit_code not in (None, 0):
        return True
    for line in log.physical:
        if line.level in ("ERROR", "CRITICAL") or _TRACEBACK.search(line.message):
            return True
    return any(_EXCEPTION.match(message.strip()) for message in log.logical) or log.has(": error: ")


def fallback(log: LogView) -> Diagnosis:
    """Nothing known matched: the first real exception, or what the exit says."""
    root = root_exception(log)
    facts: dict[str, Any] = {}
    code = log.exit_code
    if code is not None and code < 0:
        try:
            facts["signal"] = signal.Signals(-code).name
        except ValueError:
            facts["signal"] = str(-code)
    how = ""
    if code is not None:
        how = f" (killed by {facts['signal']})" if "signal" in facts else f" with exit code {code}"
    if root:
        facts["error"] = root[0]
        return make(log, "unknown", f"the server failed{how}: {root[0]}", root[1], facts)
    errors = [line.raw for line in log.physical if line.level in ("ERROR", "CRITICAL")]
    evidence = errors[0] if errors else next((p.raw for p in reversed(log.physical) if p.raw), "")
    found = failure_found(log)
    if not found:
        summary = (
            f"the server exited{how}; no failure found in the log"
            if how
            else "no failure found in the log"
        )
        return make(log, "unknown", summary, evidence, facts).model_copy(
            update={"failure_found": False}
        )
    summary = (
        f"the server exited{how}; no known failure in the log"
        if how
        else "no known failure in the log"
    )
    return make(log, "unknown", summary, evidence, facts)
