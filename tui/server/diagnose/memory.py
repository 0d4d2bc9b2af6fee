"""Device memory at startup: too little free, weights that do not fit, CUDA out of memory.

Texts: vLLM 0.9+ ``Free memory on device ... on startup is less than desired GPU memory
utilization`` (``v1/worker/gpu_worker.py``; ``v1/worker/utils.py:761-770`` in 0.32, which
added the device name); the CPU worker's node-memory checks (0.32 ``cpu_worker.py:73-95``);
0.32's ``Failed to load model - not enough GPU memory`` (``gpu_model_runner.py:5138-5148``).
Before 0.32 a weight-load OOM is torch's plain ``CUDA out of memory`` raised under
``load_model``; torch words it three ways (2.0: ``(GPU 0; X GiB total capacity; ...)``, 2.1:
``total capacty``, 2.2+: ``total capacity of X GiB of which Y is free``).
"""

from __future__ import annotations

from typing import Any, Final

from tui.domain.diagnosis import Diagnosis, Fix
from tui.domain.flags.humanint import format_human_bytes
from tui.server.diagnose.common import (
    GIB,
    MIB,
    floor2,
    gib,
    make,
    positive_int,
    run_was_eager,
    util_change,
    util_setting,
)
from tui.server.diagnose.fit import Fit, fit
from tui.server.diagnose.reading import LogView, loose, tolerant

_FREE_GPU: Final = tolerant(
    loose(
        r"Free memory on device (?:(?P<dev>[a-z]+:\d+) )?\((?P<free>[\d.]+)/(?P<total>[\d.]+) "
        r"GiB\) on startup is less than desired GPU memory utilization \((?P<util>[\d.]+), "
        r"(?P<req>[\d.]+) GiB\)"
    ),
    "desired GPU memory utilization",
)
_FREE_CPU: Final = tolerant(
    r"Available memory on node (?P<node>\d+) \((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on "
    r"startup is less than desired CPU memory utilization \((?P<util>[\d.]+), "
    r"(?P<req>[\d.]+) GiB\)",
    "desired CPU memory utilization",
)
_FREE_CPU_KV: Final = tolerant(
    r"Available memory on node (?P<node>\d+) \((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on kv "
    r"cache allocation is less than requested memory for kv(?: \((?P<req>[^)]{0,80})\))?",
    "less than requested memory for kv",
)


def utilization_that_fits(free_gib: float, total_gib: float) -> float:
    """The highest utilization (0.01 steps) whose request fits in ``free_gib``."""
    # The log rounds to 0.01 GiB: assume the worst case of both roundings.
    return floor2(max(0.0, free_gib - 0.005) / (total_gib + 0.005))


def _cpu_kv_fix(free_gib: float) -> Fix | None:
    kv = min(GIB, int(free_gib * GIB / 2) // MIB * MIB)
    if kv < MIB:
        return None
    return Fix(
        title=f"Give the KV cache an explicit size ({format_human_bytes(kv)}); the utilization "
        "check is then skipped",
        set={"kv_cache_memory_bytes": kv},
    )


def _free_memory(log: LogView, found: tuple[Any, str], where: str) -> Diagnosis:
    m, evidence = found
    free, total = float(m.group("free")), float(m.group("total"))
    util, req = float(m.group("util")), float(m.group("req"))
    fit = utilization_that_fits(free, total)
    place = (m.group("dev") or "") if where == "device" else f"node {m.group('node')}"
    facts: dict[str, Any] = {
        "free_gib": free,
        "total_gib": total,
        "requested_utilization": util,
        "requested_gib": req,
        "suggested_utilization": fit,
    }
    if place:
        facts["memory_location"] = place
    fixes: list[Fix] = []
    if fit > 0:
        fixes.append(
            Fix(
                title=f"Lower gpu_memory_utilization to {fit} ({free} of {total} GiB is free)",
                set={"gpu_memory_utilization": fit},
            )
        )
    if where == "node":
        kv_fix = _cpu_kv_fix(free)
        if kv_fix:
            fixes.append(kv_fix)
    label = "GPU" if where == "device" else "CPU"
    return make(
        log,
        "insufficient_free_memory",
        f"only {free} of {total} GiB is free on {place or 'the device'}, but "
        f"gpu_memory_utilization {util} asks for {req} GiB of {label} memory; {fit} fits",
        evidence,
        facts,
        fixes,
    )


_FREE_WORDS: Final = tolerant(
    r"Free memory on device.{0,40}? on startup is less than desired GPU memory utilization",
    "on startup is less than desired GPU memory utilization",
)


def insufficient_free_memory(log: LogView) -> Diagnosis | None:
    """Free memory below what gpu_memory_utilization asks for (GPU, CPU node, CPU KV)."""
    for pattern, where, needle in (
        (_FREE_GPU, "device", "on startup is less than desired GPU"),
        (_FREE_CPU, "node", "on startup is less than desired CPU"),
    ):
        found = log.find(pattern, needle)
        if found:
            return _free_memory(log, found, where)
    found = log.find(_FREE_CPU_KV, "less than requested memory for kv")
    if found:
        m, evidence = found
        free, total = float(m.group("free")), float(m.group("total"))
        kv_fix = _cpu_kv_fix(free)
        return make(
            log,
            "insufficient_free_memory",
            f"only {free} of {total} GiB is free on node {m.group('node')}, less than the KV "
            f"cache asks for ({m.group('req') or 'unknown'})",
            evidence,
            {"free_gib": free, "total_gib": total, "requested": m.group("req")},
            [kv_fix] if kv_fix else [],
        )
    found = log.find(_FREE_WORDS)  # the words without the figures (a title, a cut paste)
    if found:
        return make(
            log,
            "insufficient_free_memory",
            "less GPU memory is free at startup than gpu_memory_utilization asks for (the log "
            "does not give the figures): free the GPU, or lower the utilization to the free share",
            found[1],
        )
    return None


# 0.32's own message; 0.11's linear.py while creating a layer's weights (vLLM issue 28143:
# "Failed to create unquantized linear weights: CUDA out of memory. ...").
LARGEST_COMMON_GPU_GIB: Final = 80.0
"""Weights above this on one GPU do not fit an 80 GB-class card (H100, A100-80GB)."""
_WEIGHTS_OOM: Final = tolerant(
    r"Failed to load model - not enough GPU memory|Failed to create \w+ linear weights: "
    r"CUDA out of memory",
    "Failed to load model - not enough",
    "linear weights",
)
_TRIED: Final = tolerant(r"Tried to allocate (?P<n>[\d.]+) (?P<unit>GiB|MiB)", "Tried to allocate")
_CAPACITY: Final = tolerant(
    loose(
        r"GPU (?P<gpu>\d+) has a total capac\w{0,3} of (?P<total>[\d.]+) (?P<tunit>GiB|MiB) of "
        r"which (?P<free>[\d.]+) (?P<unit>GiB|MiB|KiB) is free"
    ),
    "total capac",
)
_CAPACITY_OLD: Final = tolerant(
    r"\(GPU (?P<gpu>\d+); (?P<total>[\d.]+) (?P<tunit>GiB|MiB) total capacity; [^;]{0,40}; "
    r"(?P<free>[\d.]+) (?P<unit>GiB|MiB) free",
    "total capacity;",
)
# torch's allocator ("CUDA out of memory"), and out-of-memory raised outside it: the CUDA
# runtime ("CUDA error: out of memory") and the driver API ("CUDA driver error: out of
# memory", e.g. a quantized kernel repacking its weights with cuMemAlloc).
_CUDA_OOM: Final = tolerant(
    r"CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError|CUDA (?:driver )?error: out of memory|"
    r"HIP out of memory|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|\bCUDA OOM\b",
    "out of memory",
    "OutOfMemoryError",
    "cudaoom",
)
# Frames of the weight load (V0 and V1 model runners, the loaders) and the lines that say it
# finished: an OOM with the first and without the second happened while loading the weights.
_LOAD_FRAMES: Final = tolerant(
    r"in load_model|in load_weights|model_loader|in _initialize_model|Loading model weights\.\.\.|"
    r"in process_weights_after_loading|_repack|repack_|method load_model|in create_weights",
    "load_model",
    "create_weights",
    "load_weights",
    "model_loader",
    "_initialize_model",
    "Loading model weights",
    "process_weights_after_loading",
    "repack",
)
# CUDA graph capture under way, in every wording: the progress bars ("Capturing CUDA graph
# shapes", 0.6-0.10; "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)", 0.10+), the
# start notices ("Capturing the model for CUDA graphs", 0.4-0.6 model_runner.py; "Capturing
# cudagraphs for decoding", 0.6.4-0.10 V0 model_runner.py), the capture frames (V0
# capture_model / graph_runner.capture, V1 _capture_cudagraphs, compilation/cuda_graph.py and
# backends.py entering torch.cuda.graph, torch's graphs.py capture_end) and 0.32's estimate.
# "Graph capturing finished" means it ended.
_CAPTURE: Final = tolerant(
    loose(
        r"Capturing CUDA graphs?|Capturing the model for CUDA graphs|Capturing cudagraphs?|"
        r"in capture_model|in _capture_cudagraphs|cudagraph_capture|CUDA graph capture|"
        r"in _dummy_run.{0,80}cudagraph|capture_end\(\)|in capture_end|\.capture_model\(|"
        r"torch\.cuda\.graph\(|cuda_graph\.py\W{1,4}line|graph_runner\.capture"
    ),
    "Capturing",
    "capture_model",
    "_capture_cudagraphs",
    "cudagraph_capture",
    "CUDA graph capture",
    "cudagraph",
    "capture_end",
    "torch.cuda.graph(",
    "cuda_graph.py",
    "graph_runner.capture",
)
_CAPTURED: Final = tolerant(r"Graph capturing finished", "Graph capturing finished")
# Not the loader's own "Loading weights took": quantized layers repack their weights after it
# (process_weights_after_loading), still inside the weight load.
_LOADED: Final = tolerant(
    r"Loading model weights took|Model loading took|model weights took|model weights take",
    "weights took",
    "loading took",
    "weights take",
)


def oom_facts(log: LogView) -> dict[str, Any]:
    """What torch's out-of-memory message says about the allocation and the device."""
    facts: dict[str, Any] = {}
    found = log.find(_TRIED, "Tried to allocate")
    if found:
        m = found[0]
        facts["tried_to_allocate_gib"] = round(gib(m.group("n"), m.group("unit")), 3)
    found = log.find(_CAPACITY, "total capac") or log.find(_CAPACITY_OLD, "total capacity;")
    if found:
        m = found[0]
        facts["gpu_total_gib"] = round(gib(m.group("total"), m.group("tunit")), 3)
        facts["gpu_free_gib"] = round(gib(m.group("free"), m.group("unit")), 3)
    return facts


# A quantized checkpoint's own layers in the traceback: fp8 on load cannot apply to it.
_QUANTIZED: Final = tolerant(
    r"quantization[/\\.](?:gptq|awq|marlin|bitsandbytes|gguf|compressed_tensors|fp8|"
    r"modelopt|mxfp4)|gptq_marlin|awq_marlin",
    "quantization",
    "marlin",
)


def quantized(log: LogView) -> bool:
    """Whether the traceback runs through a quantized checkpoint's own layers."""
    return log.find(_QUANTIZED) is not None


def cuda_oom(log: LogView) -> tuple[Any, str] | None:
    """The first out-of-memory the log shows (torch's, the runtime's, the driver's)."""
    return log.find(_CUDA_OOM)


def _legacy_weights_fixes(log: LogView, f: Fit) -> list[Fix]:
    """Without the arithmetic (no model size or no GPU size in the log): the usual remedies,
    more GPUs only where the log shows the box has them."""
    tp = positive_int(log, "tensor_parallel_size")
    fixes: list[Fix] = []
    # More GPUs only where the box has them: shown in the log, or (the console's own run) left
    # to the pre-flight check of the machine, which the policy requires to pass.
    if (f.gpus_on_box or 0) >= tp * 2 or (f.gpus_on_box is None and log.flags is not None):
        fixes.append(
            Fix(
                title=f"Split the weights over {tp * 2} GPUs",
                set={"tensor_parallel_size": tp * 2},
            )
        )
    if log.value("quantization") is None and f.bytes_per_param >= 2 and not quantized(log):
        fixes.append(Fix(title="Quantize the weights to fp8 on load", set={"quantization": "fp8"}))
    return fixes


def _weights_fixes(log: LogView, f: Fit) -> list[Fix]:
    """Fixes that the arithmetic says can fit the weights: fewer bytes, or more GPUs here."""
    if not f.known:
        return _legacy_weights_fixes(log, f)
    fixes: list[Fix] = []
    if f.bytes_per_param >= 4 and f.fits(bytes_per_param=2):
        fixes.append(
            Fix(
                title=f"Load the weights in float16 (half of the {f.weights_gib} GiB of float32)",
                set={"dtype": "float16"},
            )
        )
    if f.bytes_per_param >= 2 and log.value("quantization") is None and f.fits(bytes_per_param=1):
        fixes.append(Fix(title="Quantize the weights to fp8 on load", set={"quantization": "fp8"}))
    need = f.gpus_needed()
    if need is not None and need > f.tensor_parallel_size and (f.gpus_on_box or 0) >= need:
        fixes.append(
            Fix(
                title=f"Split the weights over {need} GPUs (this box has {f.gpus_on_box})",
                set={"tensor_parallel_size": need},
            )
        )
    return fixes


def _weights_summary(f: Fit, tried: str) -> str:
    if not f.known and f.params_b is not None:
        gib_total = round(f.params_b * f.bytes_per_param * 1e9 / 2**30 / f.tensor_parallel_size, 1)
        return (
            f"the model weights do not fit in GPU memory{tried}: about {gib_total} GiB per GPU "
            f"({f.params_b:g}B parameters x {f.bytes_per_param:g} bytes); the log does not give "
            "the GPU's size; a lower gpu_memory_utilization cannot help"
        )
    if not f.known:
        return "the model weights do not fit in GPU memory" + tried
    head = (
        f"the model weights do not fit in GPU memory: about {f.weights_gib} GiB per GPU "
        f"({f.params_b:g}B parameters x {f.bytes_per_param:g} bytes"
        + (f" / {f.tensor_parallel_size} GPUs" if f.tensor_parallel_size > 1 else "")
        + f") against {f.gpu_gib} GiB"
    )
    if f.fits(bytes_per_param=1) or f.fits(bytes_per_param=2):
        return head + "; fewer bytes per parameter fit"
    need = f.gpus_needed()
    where = (f"it needs {need} such GPUs" if need else "no number of such GPUs holds it") + (
        f", this box shows {f.gpus_on_box}" if f.gpus_on_box is not None else ""
    )
    return (
        head + f"; this model does not fit this GPU, even in fp8 ({where}); a lower "
        "gpu_memory_utilization cannot help"
    )


def _above_any_card(f: Fit) -> bool:
    """No GPU size in the log, but one GPU's weights above the largest common card (80 GB
    class): a 72B model in 16 bits with tensor_parallel_size 1 (vLLM issue 11560)."""
    if f.known or f.params_b is None or f.tensor_parallel_size != 1:
        return False
    return f.params_b * f.bytes_per_param * 1e9 / 2**30 > LARGEST_COMMON_GPU_GIB


def _weights_found(log: LogView, f: Fit) -> tuple[Any, str] | None:
    """0.32's own message, an OOM under the weight load, or one whose weights exceed the GPU."""
    found = log.find(_WEIGHTS_OOM, "not enough GPU memory")
    if found is not None:
        return found
    oom = log.find(_CUDA_OOM)
    if oom is None or log.find(_LOADED) is not None or capturing(log):
        return None  # the weights were loaded: whatever ran out, it was not them
    if f.known and not f.fits():  # the arithmetic decides: no load could have fitted
        return oom
    if _above_any_card(f):
        return oom
    # Order-free: a worker's load_model frames may follow another worker's OOM line (vLLM
    # issue 14095), and nothing says the weights finished loading.
    return oom if _LOAD_FRAMES.search(log.flat) else None


def weights_oom(log: LogView) -> Diagnosis | None:
    """The weights did not fit: 0.32's own message, an OOM under the weight load, or an OOM
    where the log's own numbers put the weights above the GPU."""
    f = fit(log)
    found = _weights_found(log, f)
    if found is None:
        return None
    facts = oom_facts(log)
    facts["tensor_parallel_size"] = positive_int(log, "tensor_parallel_size")
    if f.params_b is not None:
        facts["params_b"] = f.params_b
    if f.known:
        facts.update(
            weights_gib_estimate=f.weights_gib,
            gpu_gib=f.gpu_gib,
            params_b=f.params_b,
            bytes_per_param=f.bytes_per_param,
        )
    if f.gpus_on_box is not None:
        facts["gpus_on_box"] = f.gpus_on_box
    tried = ""
    if "tried_to_allocate_gib" in facts:
        tried = f" (tried to allocate {facts['tried_to_allocate_gib']} GiB)"
    return make(
        log, "weights_oom", _weights_summary(f, tried), found[1], facts, _weights_fixes(log, f)
    )


_SAMPLER_OOM: Final = tolerant(
    r"CUDA out of memory occurred when warming up (?:the )?(?P<what>sampler|pooler).{0,40}? with "
    r"(?P<n>\d+) dummy requests",
    "dummy requests",
)


def lower_util_fix(log: LogView) -> Fix | None:
    """gpu_memory_utilization 0.05 lower: room outside the KV cache."""
    util = util_setting(log)
    lower = floor2(util.value - 0.05)
    if lower <= 0:
        return None
    return Fix(
        title=util_change("Lower", util, lower, "room outside the KV cache"),
        set={"gpu_memory_utilization": lower},
    )


def _capture_oom(log: LogView, evidence: str) -> Diagnosis:
    """Out of memory while capturing CUDA graphs: eager mode needs no graph memory.

    Not a lower gpu_memory_utilization: the graphs' memory is what ran out, and eager mode
    (or fewer captured batch sizes, which a lower ``max_num_seqs`` caps) removes it.
    """
    fixes: list[Fix] = []
    if not run_was_eager(log):
        fixes.append(
            Fix(
                title="Run eagerly (--enforce-eager): no CUDA graphs to capture",
                set={"enforce_eager": True},
            )
        )
    mns = log.value("max_num_seqs")
    if isinstance(mns, int) and not isinstance(mns, bool) and mns > 1:
        fixes.append(
            Fix(
                title=f"Lower max_num_seqs to {mns // 2} (fewer CUDA graph sizes to capture)",
                set={"max_num_seqs": mns // 2},
            )
        )
    return make(
        log,
        "out_of_memory",
        "the GPU ran out of memory capturing CUDA graphs; --enforce-eager skips them (a lower "
        "gpu_memory_utilization is not the remedy: the graphs' memory is what ran out)",
        evidence,
        {**oom_facts(log), "stage": "cuda_graph_capture"},
        fixes,
    )


_CAPTURE_FRAMES: Final = tolerant(
    loose(
        r"capture_end\(\)|in capture_end|in capture_model|\.capture_model\(|"
        r"in _capture_cudagraphs|torch\.cuda\.graph\(|graph_runner\.capture|cudagraph_capture"
    ),
    "capture_end",
    "capture_model",
    "_capture_cudagraphs",
    "torch.cuda.graph(",
    "graph_runner.capture",
    "cudagraph_capture",
)


def capturing(log: LogView) -> bool:
    """The OOM struck while capturing: a capture frame in its traceback, or a capture begun
    and never finished. Order-free on purpose: a log pasted newest line first works too."""
    if log.find(_CAPTURE_FRAMES) is not None:
        return True
    return log.find(_CAPTURE) is not None and log.find(_CAPTURED) is None


def out_of_memory(log: LogView) -> Diagnosis | None:
    """CUDA out of memory after the weights: warm-up, profiling, CUDA graphs."""
    found = log.find(_SAMPLER_OOM, "dummy requests")
    if found:
        m, evidence = found
        n = int(m.group("n"))
        fixes = [
            Fix(
                title=f"Lower max_num_seqs to {max(1, n // 2)}",
                set={"max_num_seqs": max(1, n // 2)},
            )
        ]
        util_fix = lower_util_fix(log)
        if util_fix:
            fixes.append(util_fix)
        return make(
            log,
            "out_of_memory",
            f"CUDA ran out of memory warming up the {m.group('what')} with {n} dummy requests",
            evidence,
            {"dummy_requests": n, **oom_facts(log)},
            fixes,
        )
    found = log.find(_CUDA_OOM)
    if not found:
        return None
    if capturing(log):
        return _capture_oom(log, found[1])
    util_fix = lower_util_fix(log)
    fixes = [util_fix] if util_fix else []
    mns = log.value("max_num_seqs")
    if isinstance(mns, int) and mns > 1:
        fixes.append(Fix(title=f"Lower max_num_seqs to {mns // 2}", set={"max_num_seqs": mns // 2}))
    return make(
        log,
        "out_of_memory",
        "the GPU ran out of memory during startup",
        found[1],
        oom_facts(log),
        fixes,
    )
