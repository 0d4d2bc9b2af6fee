"""The KV cache at startup: room for no block at all, or not for one max_model_len request.

How vLLM words it, by version (each quoted in the corpus, ``tests/diagnosis/corpus/``):

- 0.4-0.10 (V0 ``executor/utils.py``, then ``worker/worker.py``; V1's first ``gpu_worker.py``
  in 0.6.6): ``The model's max seq len (X) is larger than the maximum number of tokens that
  can be stored in KV cache (Y).`` Y is the whole cache in tokens.
- 0.7 (``v1/core/kv_cache_utils.py``): ``To serve at least one request with the models's max
  seq len (X), (N GB KV cache is needed, which is larger than the available KV cache memory
  (A GB).`` (GiB numbers printed as "GB"; no estimate).
- 0.9+: ``... GiB ...``, then ``Based on the available memory, the estimated maximum model
  length is E.``; 0.32 spells "model's" and names the CPU backend (reference 2.3).
- all: ``No available memory for the cache blocks.``; 0.32's auto-fit: ``Cannot auto-fit
  max_model_len: not enough GPU memory available to serve even a single token.``

Without an estimate in the text, the largest safe length is computed from the two GiB
figures: KV bytes grow with the number of blocks, and each figure is rounded to 0.01 GiB.
"""

from __future__ import annotations

import math
from typing import Any, Final

from tui.domain.diagnosis import Diagnosis, Fix
from tui.domain.flags.humanint import format_human_bytes
from tui.server.diagnose.common import (
    GIB,
    block_size,
    cdiv,
    ceil2,
    ceil_mib,
    floor2,
    make,
    util_change,
    util_setting,
)
from tui.server.diagnose.reading import LogView, loose, tolerant

_KV_TOO_SMALL: Final = tolerant(
    loose(
        r"max seq len \((?P<mml>\d+)\), \((?P<needed>[\d.]+) (?:GiB|GB) KV cache is needed, "
        r"which is larger than the available KV cache memory "
        r"\((?P<available>-?[\d.]+) (?:GiB|GB)\)\. "
        r"(?:Based on the available memory, the estimated maximum model length is (?P<est>\d+)\.)?"
    ),
    "KV cache is needed",
)
_KV_TOO_SMALL_OLD: Final = tolerant(
    loose(
        r"(?:The model'?s'? )?max seq len \((?P<mml>\d+)\) is larger than the maximum number of "
        r"tokens that can be stored in KV cache \((?P<tokens>\d+)\)"
    ),
    "can be stored in KV cache",
)
_KV_SET: Final = tolerant(
    loose(r"(?P<how>Auto|Explicitly) set \((?P<kv>[\d.]+)/(?P<total>[\d.]+)\) GiB for KV cache"),
    "GiB for KV cache",
)
GIB_ROUNDING: Final = 0.005  # format_gib rounds to 0.01 GiB (utils/mem_utils.py:30-31)


def bound_from_gib(mml: int, bs: int, needed_gib: float, available_gib: float) -> int:
    """The longest max_model_len (a multiple of ``bs``) sure to fit ``available_gib``.

    ``needed_gib`` is what ``mml`` tokens need: ``cdiv(mml, bs)`` blocks. Both figures are
    rounded in the log, so the block's size is taken at its largest and the room at its
    smallest; one block stays free for vLLM's null block (reference 2.2).
    """
    if needed_gib < 0.01 or available_gib <= GIB_ROUNDING:
        return 0
    per_block = (needed_gib + GIB_ROUNDING) / cdiv(mml, bs)
    blocks = math.floor((available_gib - GIB_ROUNDING) / per_block) - 1
    return max(0, blocks) * bs


def _kv_bytes_needed(
    log: LogView,
    mml: int,
    bs: int,
    blocks_now: int | None,
    needed_gib: float | None,
    available_gib: float | None,
) -> float | None:
    kv_bytes = log.value("kv_cache_memory_bytes")
    blocks_needed = cdiv(mml, bs) + 1  # + BlockPool's null block (kv_cache_utils.py:2627-2633)
    if isinstance(kv_bytes, int) and kv_bytes > 0 and blocks_now:
        return kv_bytes / blocks_now * blocks_needed
    if (
        isinstance(kv_bytes, int)
        and kv_bytes > 0
        and needed_gib
        and available_gib
        and available_gib > 0
    ):
        return kv_bytes * needed_gib / available_gib
    if needed_gib:
        return (needed_gib + 0.01) * GIB  # + the log's rounding to 0.01 GiB
    return None


def _kv_memory_fixes(
    log: LogView,
    mml: int,
    bs: int,
    blocks_now: int | None,
    needed_gib: float | None,
    available_gib: float | None,
) -> list[Fix]:
    """Fixes that give the KV cache room for one request of ``mml`` tokens.

    ``blocks_now`` is the number of blocks the run had (estimated/block + vLLM's null block,
    reference 2.2) when the log says so.
    """
    override = log.value("num_gpu_blocks_override")
    if isinstance(override, int):
        blocks_needed = cdiv(mml, bs) + 1
        return [
            Fix(
                title=f"Raise num_gpu_blocks_override from {override} to {blocks_needed} "
                f"({cdiv(mml, bs)} blocks of {bs} tokens plus the null block)",
                set={"num_gpu_blocks_override": blocks_needed},
            )
        ]
    fixes: list[Fix] = []
    kv_bytes = log.value("kv_cache_memory_bytes")
    needed_bytes = _kv_bytes_needed(log, mml, bs, blocks_now, needed_gib, available_gib)
    if needed_bytes:
        new = ceil_mib(needed_bytes)
        verb = "Raise" if isinstance(kv_bytes, int) else "Set"
        fixes.append(
            Fix(
                title=f"{verb} kv_cache_memory_bytes to {format_human_bytes(new)} (enough for one "
                f"{mml}-token request)",
                set={"kv_cache_memory_bytes": new},
            )
        )
    if not isinstance(kv_bytes, int) and needed_gib is not None and available_gib is not None:
        # Utilization sizing: the shortfall as a share of total memory, when the log names it.
        found = log.find(_KV_SET, "GiB for KV cache")
        if found:
            total = float(found[0].group("total"))
            util = util_setting(log)
            new_util = ceil2(util.value + (needed_gib - available_gib + 0.01) / total)
            if util.value < new_util <= 1.0:
                fixes.append(
                    Fix(
                        title=util_change("Raise", util, new_util),
                        set={"gpu_memory_utilization": new_util},
                    )
                )
    return fixes


def _lower_fix(fit: int, why: str) -> Fix:
    return Fix(title=f"Lower max_model_len to {fit} ({why})", set={"max_model_len": fit})


def _kv_from_gib(log: LogView, m: Any, evidence: str) -> Diagnosis:
    bs, bs_source = block_size(log)
    mml = int(m.group("mml"))
    needed, available = float(m.group("needed")), float(m.group("available"))
    est = int(m.group("est")) if m.group("est") else None
    facts: dict[str, Any] = {
        "max_model_len": mml,
        "needed_gib": needed,
        "available_gib": available,
        "block_size": bs,
        "block_size_source": bs_source,
    }
    fixes: list[Fix] = []
    blocks_now: int | None = None
    if est:
        facts["estimated_max_model_len"] = est
        fit = (est // bs) * bs
        blocks_now = est // bs + 1
        if fit > 0:
            facts["suggested_max_model_len"] = fit
            fixes.append(
                _lower_fix(fit, f"the estimated maximum {est}, rounded down to the block size {bs}")
            )
    else:
        fit = bound_from_gib(mml, bs, needed, available)
        if fit > 0:
            facts["suggested_max_model_len"] = fit
            fixes.append(
                _lower_fix(fit, f"{available} of the {needed} GiB it needs, in blocks of {bs}")
            )
    fixes += _kv_memory_fixes(log, mml, bs, blocks_now, needed, available)
    override = log.value("num_gpu_blocks_override")
    if isinstance(override, int):
        facts["num_gpu_blocks_override"] = override
    most = f"; at most {est} tokens fit" if est else ""
    # Tiny caches print 0.0 GiB for both (capture fail_a2): then the GiB say nothing.
    gib = f" ({needed} GiB needed, {available} GiB available)" if needed >= 0.01 else ""
    return make(
        log,
        "kv_cache_too_small",
        f"max_model_len {mml} does not fit in the KV cache{gib}{most}",
        evidence,
        facts,
        fixes,
    )


def kv_cache_too_small(log: LogView) -> Diagnosis | None:
    """One max_model_len request does not fit the KV cache."""
    found = log.find(_KV_TOO_SMALL, "KV cache is needed")
    if found:
        return _kv_from_gib(log, found[0], found[1])
    found = log.find(_KV_TOO_SMALL_OLD, "can be stored in KV cache")
    if not found:
        return None
    m, evidence = found
    bs, bs_source = block_size(log)
    mml, tokens = int(m.group("mml")), int(m.group("tokens"))
    fit = (tokens // bs) * bs
    facts: dict[str, Any] = {
        "max_model_len": mml,
        "kv_cache_tokens": tokens,
        "block_size": bs,
        "block_size_source": bs_source,
    }
    fixes: list[Fix] = []
    if fit > 0:
        facts["suggested_max_model_len"] = fit
        fixes.append(
            _lower_fix(fit, f"the {tokens} KV-cache tokens, rounded down to the block size {bs}")
        )
    blocks_now = tokens // bs + 1 if tokens >= bs else None
    fixes += _kv_memory_fixes(log, mml, bs, blocks_now, None, None)
    return make(
        log,
        "kv_cache_too_small",
        f"max_model_len {mml} is larger than the {tokens} tokens the KV cache holds",
        evidence,
        facts,
        fixes,
    )


_NO_KV: Final = tolerant(
    r"No available memory for the cache blocks|Cannot auto-fit max_model_len: not enough \w+ "
    r"memory available to serve even a single token",
    "No available memory for the cache blocks",
    "Cannot auto-fit max_model_len",
)
_AVAILABLE_KV: Final = tolerant(
    loose(r"Available KV cache memory: (?P<gib>-?[\d.]+) GiB"), "Available KV cache memory"
)


def no_kv_found(log: LogView) -> tuple[Any, str] | None:
    """vLLM's "no memory left for the cache blocks" (or 0.32's auto-fit refusal), if shown."""
    return log.find(_NO_KV)


def no_kv_cache_memory(log: LogView) -> Diagnosis | None:
    """Nothing left for the KV cache after weights and activations."""
    found = log.find(_NO_KV)
    if not found:
        return None
    facts: dict[str, Any] = {}
    available = log.find(_AVAILABLE_KV, "Available KV cache memory")
    if available:
        facts["available_gib"] = float(available[0].group("gib"))
    kv_set = log.find(_KV_SET, "GiB for KV cache")
    if kv_set:
        facts["kv_gib"] = float(kv_set[0].group("kv"))
        facts["total_gib"] = float(kv_set[0].group("total"))
    fixes: list[Fix] = []
    if log.device == "cpu":
        fixes.append(
            Fix(
                title="Give the KV cache an explicit size of 1G (like VLLM_CPU_KVCACHE_SPACE=1)",
                set={"kv_cache_memory_bytes": GIB},
            )
        )
    else:
        util = util_setting(log)
        raised = min(0.99, floor2(util.value + 0.05))
        if raised > util.value:
            fixes.append(
                Fix(
                    title=util_change("Raise", util, raised),
                    set={"gpu_memory_utilization": raised},
                )
            )
    if facts.get("kv_gib") == 0:
        summary = f"the KV cache was given 0 of {facts['total_gib']} GiB (KV cache space 0)"
    elif "available_gib" in facts:
        summary = (
            "no memory is left for the KV cache after weights and activations "
            f"(available: {facts['available_gib']} GiB)"
        )
    else:
        summary = "no memory is left for the KV cache after weights and activations"
    return make(log, "no_kv_cache_memory", summary, found[1], facts, fixes)
