"""vLLM's defaults, one :class:`ServeDefaults` per release: what ``vllm serve`` uses for a
flag it is not given.

Each release record names its defaults; a consumer that knows the vLLM version (the
simulator, the diagnosis) reads them there, one that knows none reads the provisioned
release's constants here: the flag declarations (:mod:`tui.domain.flags.serve_fields`,
shown in the form and used by ``ServeFlags.effective``) and the start-up budget
(:mod:`tui.domain.budget`). Citations are ``vllm-0.32-reference.md`` sections 1.3 and 1.4
(``path:line`` relative to vLLM 0.32.0's package directory).

The ones vLLM derives at start-up (the batch limits, the block size) are functions of the
device, as vLLM computes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

DeviceKind = Literal["gpu", "cpu"]

GIB: Final = 2**30


@dataclass(frozen=True)
class ServeDefaults:
    """One release's defaults: what its ``vllm serve`` uses for a flag it is not given.

    Each release record (:class:`tui.domain.vllm_release.VllmRelease`) names its own; a
    consumer that knows the vLLM version reads ``release_of(version).defaults``.
    """

    gpu_memory_utilization: float
    kv_cache_dtype: str
    dtype: str
    cpu_offload_gb: float
    max_logprobs: int
    enforce_eager: bool
    tensor_parallel_size: int
    pipeline_parallel_size: int
    port: int
    performance_mode: str
    performance_modes: tuple[str, ...]
    scheduling_policy: str
    stream_interval: int
    gpu_block_size: int
    cpu_block_size: int

    def by_flag(self) -> Mapping[str, Any]:
        """The static defaults by ``ServeFlags`` name; a declared flag missing here is derived
        at start-up (from the model's config or the device) and has no single default."""
        return {
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "kv_cache_dtype": self.kv_cache_dtype,
            "cpu_offload_gb": self.cpu_offload_gb,
            "max_logprobs": self.max_logprobs,
            "dtype": self.dtype,
            "enforce_eager": self.enforce_eager,
            "tensor_parallel_size": self.tensor_parallel_size,
            "pipeline_parallel_size": self.pipeline_parallel_size,
            "port": self.port,
        }

    def block_size(self, kind: DeviceKind) -> int:
        """The block size vLLM picks on ``kind`` when none is given."""
        return self.cpu_block_size if kind == "cpu" else self.gpu_block_size


V0_32_DEFAULTS: Final = ServeDefaults(
    gpu_memory_utilization=0.92,  # config/cache.py:102, engine/arg_utils.py:1356-1361
    kv_cache_dtype="auto",  # config/cache.py:39-59
    dtype="auto",  # config/model.py:99
    cpu_offload_gb=0.0,  # config/offload.py:23
    max_logprobs=20,  # config/model.py:282-286
    enforce_eager=False,  # engine/arg_utils.py:975
    tensor_parallel_size=1,  # config/parallel.py:141
    pipeline_parallel_size=1,  # config/parallel.py:139
    port=8000,  # entrypoints/launchers/cli_args.py:285
    # --host: None, i.e. every interface (cli_args.py:283); vtc itself passes loopback (issue 8).
    performance_mode="balanced",  # config/vllm.py:139,433
    performance_modes=("balanced", "interactivity", "throughput"),
    scheduling_policy="fcfs",  # config/scheduler.py:21,159
    stream_interval=1,  # config/scheduler.py:213
    gpu_block_size=16,  # config/cache.py:72,344-347
    cpu_block_size=128,  # platforms/cpu.py:292-293
)
"""vLLM 0.32.0's (reference 1.3)."""

V0_33_DEFAULTS: Final = V0_32_DEFAULTS
"""vLLM 0.33.0's: the same values (config/cache.py:185,215; config/model.py:286;
config/scheduler.py:216; platforms/cpu.py; its parser table agrees, see
``tests/domain/test_vllm_defaults.py``)."""

# -- the provisioned release's, for the callers that know no version ---------------------------
# The release `vtc setup-cpu-vllm` provisions (tui.domain.vllm_release.PROVISIONED); the
# flag declarations show these, and pre-flight uses them for a vLLM it cannot name.
PROVISIONED_DEFAULTS: Final = V0_32_DEFAULTS
GPU_MEMORY_UTILIZATION: Final = PROVISIONED_DEFAULTS.gpu_memory_utilization
KV_CACHE_DTYPE: Final = PROVISIONED_DEFAULTS.kv_cache_dtype
DTYPE: Final = PROVISIONED_DEFAULTS.dtype
CPU_OFFLOAD_GB: Final = PROVISIONED_DEFAULTS.cpu_offload_gb
MAX_LOGPROBS: Final = PROVISIONED_DEFAULTS.max_logprobs
ENFORCE_EAGER: Final = PROVISIONED_DEFAULTS.enforce_eager
TENSOR_PARALLEL_SIZE: Final = PROVISIONED_DEFAULTS.tensor_parallel_size
PIPELINE_PARALLEL_SIZE: Final = PROVISIONED_DEFAULTS.pipeline_parallel_size
PORT: Final = PROVISIONED_DEFAULTS.port
PERFORMANCE_MODE: Final = PROVISIONED_DEFAULTS.performance_mode
PERFORMANCE_MODES: Final = PROVISIONED_DEFAULTS.performance_modes
SCHEDULING_POLICY: Final = PROVISIONED_DEFAULTS.scheduling_policy
STREAM_INTERVAL: Final = PROVISIONED_DEFAULTS.stream_interval
GPU_BLOCK_SIZE: Final = PROVISIONED_DEFAULTS.gpu_block_size
CPU_BLOCK_SIZE: Final = PROVISIONED_DEFAULTS.cpu_block_size


def default_block_size(kind: DeviceKind) -> int:
    """16 on GPU (``config/cache.py:344-347``), 128 on CPU (``platforms/cpu.py:292-293``)."""
    return PROVISIONED_DEFAULTS.block_size(kind)


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
SERVE_DEFAULTS: Mapping[str, Any] = PROVISIONED_DEFAULTS.by_flag()
"""Static defaults by ``ServeFlags`` name (the provisioned release's)."""
