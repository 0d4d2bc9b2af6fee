"""vLLM 0.32's defaults, declared once: what ``vllm serve`` uses for a flag it is not given.

Everything that needs one of vLLM's defaults imports it from here: the flag declarations
(:mod:`tui.domain.flags.serve`, shown in the form and used by ``ServeFlags.effective``), the
start-up budget (:mod:`tui.domain.budget`, pre-flight and the simulator), the diagnosis
and the simulator's own command line. Citations are ``vllm-0.32-reference.md`` sections
1.3 and 1.4 (``path:line`` relative to vLLM 0.32.0's package directory).

Static defaults are plain constants; the ones vLLM derives at start-up (the batch limits,
the block size) are functions of the device, as vLLM computes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

DeviceKind = Literal["gpu", "cpu"]

GIB: Final = 2**30

# -- static defaults of the declared flags (reference 1.3) ----------------------------------------
GPU_MEMORY_UTILIZATION: Final = 0.92  # config/cache.py:102, engine/arg_utils.py:1356-1361
KV_CACHE_DTYPE: Final = "auto"  # config/cache.py:39-59
DTYPE: Final = "auto"  # config/model.py:99
CPU_OFFLOAD_GB: Final = 0.0  # config/offload.py:23
MAX_LOGPROBS: Final = 20  # config/model.py:282-286
ENFORCE_EAGER: Final = False  # engine/arg_utils.py:975
TENSOR_PARALLEL_SIZE: Final = 1  # config/parallel.py:141
PIPELINE_PARALLEL_SIZE: Final = 1  # config/parallel.py:139
PORT: Final = 8000  # entrypoints/launchers/cli_args.py:285
# --host: None, i.e. every interface (cli_args.py:283); vtc itself passes loopback (issue 8).

# -- other frontend/engine defaults vtc reads ---------------------------------------------------
PERFORMANCE_MODE: Final = "balanced"  # config/vllm.py:139,433
PERFORMANCE_MODES: Final = ("balanced", "interactivity", "throughput")
SCHEDULING_POLICY: Final = "fcfs"  # config/scheduler.py:21,159
STREAM_INTERVAL: Final = 1  # config/scheduler.py:213

# -- derived at start-up: block size (reference 1.3) ---------------------------------------------
GPU_BLOCK_SIZE: Final = 16  # config/cache.py:72,344-347
CPU_BLOCK_SIZE: Final = 128  # platforms/cpu.py:292-293


def default_block_size(kind: DeviceKind) -> int:
    """16 on GPU (``config/cache.py:344-347``), 128 on CPU (``platforms/cpu.py:292-293``)."""
    return CPU_BLOCK_SIZE if kind == "cpu" else GPU_BLOCK_SIZE


# -- derived at start-up: batch limits (reference 1.4) ------------------------------------------
@dataclass(frozen=True)
class BatchDefaults:
    """``get_batch_defaults`` for the OpenAI server (``engine/arg_utils.py:2894-2985``)."""

    max_num_batched_tokens: int
    max_num_seqs: int


def batch_defaults(
    total_bytes: int, device_name: str = "", kind: DeviceKind = "gpu", world_size: int = 1
) -> BatchDefaults:
    """Reference 1.4: >=160 GiB 16384/1024; >=70 GiB and not A100 8192/1024; else 2048/256.

    CPU: ``2048 x world_size`` / ``128 x world_size`` (world size = TP x PP,
    ``engine/arg_utils.py:3103``).
    """
    if kind == "cpu":
        ws = max(1, world_size)
        return BatchDefaults(2048 * ws, 128 * ws)
    gib = total_bytes / GIB
    if gib >= 160:
        return BatchDefaults(16384, 1024)
    if gib >= 70 and "a100" not in device_name.lower():
        return BatchDefaults(8192, 1024)
    return BatchDefaults(2048, 256)


# -- by flag name, for the flag declarations ----------------------------------------------------
SERVE_DEFAULTS: Mapping[str, Any] = {
    "gpu_memory_utilization": GPU_MEMORY_UTILIZATION,
    "kv_cache_dtype": KV_CACHE_DTYPE,
    "cpu_offload_gb": CPU_OFFLOAD_GB,
    "max_logprobs": MAX_LOGPROBS,
    "dtype": DTYPE,
    "enforce_eager": ENFORCE_EAGER,
    "tensor_parallel_size": TENSOR_PARALLEL_SIZE,
    "pipeline_parallel_size": PIPELINE_PARALLEL_SIZE,
    "port": PORT,
}
"""Static defaults by ``ServeFlags`` name; a declared flag missing here is derived at start-up
(from the model's config or the device) and has no single default."""
