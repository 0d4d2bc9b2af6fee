"""What a simulated GPU does with its memory at startup: vLLM's budget, step by step.

Follows ``vllm-0.32-reference.md`` section 2.1 (``v1/worker/gpu_worker.py:533-762``):

1. ``requested = ceil(total * gpu_memory_utilization)``; if the memory free at startup (total
   minus what other processes and this process' CUDA context hold) is smaller, vLLM refuses
   (``v1/worker/utils.py:761-770``).
2. Weights load. They OOM only when they do not fit in the *physically* free memory, as on
   real hardware; weights that fit the device but not the requested budget leave a negative
   KV budget instead ("No available memory for the cache blocks").
3. The profile run at ``max_num_batched_tokens`` adds non-torch memory and an activation
   peak; the CUDA-graph estimate is subtracted unless ``--enforce-eager``.
4. ``available_kv = requested - non_kv - cudagraph`` (or ``kv_cache_memory_bytes``), then
   the KV checks of ``v1/core/kv_cache_utils.py:1009-1040,2369-2483`` using
   :mod:`tui.domain.kv` for every formula.

The arithmetic itself (defaults, weights, requested memory, activation/non-torch/CUDA-graph
approximations, available KV) lives in :mod:`tui.domain.budget`, which the console's
pre-flight estimate uses too; this module adds the simulated machine and the order in which
vLLM fails. The module is pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Literal

from tui.domain import budget, kv
from tui.domain.budget import (
    CHECKPOINT_QUANT_BYTES,
    CUDA_CONTEXT_BYTES,
    FLASH_ATTN_BLOCK_MULTIPLE,
    FP8_QUANT,
    GPU_DEFAULT_BLOCK_SIZE,
    NCCL_BYTES,
    NON_TORCH_BYTES,
    ONLINE_QUANT_BYTES,
    BatchDefaults,
    EngineConfig,
)
from tui.domain.budget import COMPATIBLE_QUANT as _COMPATIBLE
from tui.domain.flags.serve import ServeFlags
from tui.domain.vllm_release import release_of
from tui.sim.catalog import GIB, MIB, GpuSpec, ModelEntry
from tui.sim.versions import DEFAULT_SIM_VLLM_VERSION

# Re-exported for the simulator's other modules and tests (the numbers are the domain's).
__all__ = [
    "CHECKPOINT_QUANT_BYTES",
    "CUDA_CONTEXT_BYTES",
    "FLASH_ATTN_BLOCK_MULTIPLE",
    "FP8_QUANT",
    "GPU_DEFAULT_BLOCK_SIZE",
    "NCCL_BYTES",
    "NON_TORCH_BYTES",
    "ONLINE_QUANT_BYTES",
    "_COMPATIBLE",
    "BatchDefaults",
    "MemoryPlan",
    "ResolvedConfig",
    "SimHardware",
    "StartupFailure",
    "activation_peak_bytes",
    "batch_defaults",
    "cudagraph_bytes",
    "kv_cache_memory_hint",
    "non_torch_bytes",
    "plan_memory",
    "resolve",
    "resolved_dtype",
    "weight_bytes",
]


@dataclass(frozen=True)
class SimHardware:
    """The simulated machine: which GPU, how many, and what others already use on each."""

    gpu: GpuSpec
    num_gpus: int = 1
    used_by_others: int = 0  # bytes per GPU held by other processes (a desktop, WSL)


def batch_defaults(gpu: GpuSpec) -> BatchDefaults:
    """Reference 1.4 for a catalog GPU (:func:`tui.domain.budget.batch_defaults`)."""
    return budget.batch_defaults(gpu.total_bytes, gpu.name, "gpu")


def resolved_dtype(entry: ModelEntry, dtype_flag: str | None) -> str:
    """The torch dtype vLLM runs with (:func:`tui.domain.budget.resolved_dtype`)."""
    return budget.resolved_dtype(entry.shape, dtype_flag)


@dataclass(frozen=True)
class ResolvedConfig(EngineConfig):
    """The domain's resolved engine configuration plus the simulated model and machine."""

    flags: ServeFlags
    entry: ModelEntry
    hardware: SimHardware


def resolve(
    flags: ServeFlags,
    entry: ModelEntry,
    hardware: SimHardware,
    performance_mode: str = "balanced",
    version: str = DEFAULT_SIM_VLLM_VERSION,
) -> ResolvedConfig:
    """Apply vLLM ``version``'s defaults to ``flags`` (reference 1.3 and 1.4, via the
    domain)."""
    engine = budget.resolve_engine(
        flags,
        entry.shape,
        total_bytes=hardware.gpu.total_bytes,
        device_name=hardware.gpu.name,
        kind="gpu",
        checkpoint_quantization=entry.checkpoint_quantization,
        embedding_params=entry.embedding_params,
        performance_mode=performance_mode,
        defaults=release_of(version).defaults,
    )
    values = {f.name: getattr(engine, f.name) for f in fields(EngineConfig)}
    return ResolvedConfig(**values, flags=flags, entry=entry, hardware=hardware)


# -- sizes (the domain's, with the simulator's argument types) ---------------------------------
def weight_bytes(entry: ModelEntry, dtype_bytes: float, quantization: str | None) -> float:
    """All weights in bytes (:func:`tui.domain.budget.weight_bytes`)."""
    return budget.weight_bytes(entry.shape, dtype_bytes, quantization, entry.embedding_params)


def activation_peak_bytes(cfg: ResolvedConfig) -> int:
    """Transient torch peak of the profile run (:func:`tui.domain.budget.activation_peak_bytes`)."""
    return budget.activation_peak_bytes(cfg)


def non_torch_bytes(cfg: ResolvedConfig) -> int:
    """Non-torch growth during profiling (:func:`tui.domain.budget.non_torch_bytes`)."""
    return budget.non_torch_bytes(cfg.world_size)


def cudagraph_bytes(cfg: ResolvedConfig) -> int:
    """CUDA-graph pool estimate (:func:`tui.domain.budget.cudagraph_bytes`)."""
    return budget.cudagraph_bytes(cfg)


# -- the plan ---------------------------------------------------------------------------------
FailureKind = Literal[
    "free_memory",  # requested > free at startup (worker init_device)
    "weights_oom",  # weights do not fit the free device memory (load_model)
    "sampler_oom",  # profile run / sampler warm-up does not fit
    "no_kv_memory",  # available KV memory <= 0
    "autofit_impossible",  # --max-model-len -1 and not even one token fits
    "kv_too_small",  # one max_model_len request does not fit
    "kv_alloc_oom",  # --kv-cache-memory-bytes larger than the device can hold
    "block_size",  # no attention kernel for this block size
]


@dataclass(frozen=True)
class StartupFailure:
    """Why the engine fails to start, with the exception vLLM raises (type and text)."""

    kind: FailureKind
    exc_type: str
    message: str
    logged_error: str | None = None  # an ERROR record vLLM logs before raising


@dataclass(frozen=True)
class MemoryPlan(budget.MemoryBudget):
    """Everything the startup log reports about memory, per GPU (rank 0), in bytes: the
    domain's start-up memory record (:class:`tui.domain.budget.MemoryBudget`) and what the
    walk of vLLM's checks decided."""

    cfg: ResolvedConfig
    free_at_start: int  # always known to the simulator
    max_model_len: int  # final (after auto-fit)
    capacity: kv.KvCapacity | None = None
    auto_fit_message: str | None = None
    failure: StartupFailure | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def kv_allocated(self) -> int:
        """Bytes the KV cache holds once allocated (0 if startup failed before)."""
        if self.capacity is None:
            return 0
        return self.capacity.num_blocks * self.capacity.bytes_per_block

    @property
    def process_bytes(self) -> int:
        """What this process holds on the GPU once serving (context included)."""
        return CUDA_CONTEXT_BYTES + self.non_kv + self.cudagraph + self.kv_allocated


def _gib(n: float) -> str:
    return kv.format_gib(n)


def free_memory_message(free: int, total: int, util: float, requested: int) -> str:
    """``v1/worker/utils.py:761-770``."""
    return (
        f"Free memory on device cuda:0 ({_gib(free)}/{_gib(total)} GiB) on startup is less "
        f"than desired GPU memory utilization ({util}, {_gib(requested)} GiB). Decrease GPU "
        "memory utilization or reduce GPU memory used by other processes."
    )


def torch_oom_message(alloc: int, total: int, free: int, process: int) -> str:
    """torch's ``CUDA out of memory`` text (``torch.OutOfMemoryError``)."""
    allocated = max(0, process - CUDA_CONTEXT_BYTES)
    return (
        f"CUDA out of memory. Tried to allocate {_mib_text(alloc)}. GPU 0 has a total capacity "
        f"of {_gib(total)} GiB of which {_mib_text(max(free, 0))} is free. Including non-PyTorch "
        f"memory, this process has {_gib(process)} GiB memory in use. Of the allocated memory "
        f"{_gib(allocated)} GiB is allocated by PyTorch, and 1.27 MiB is reserved by PyTorch "
        "but unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
        "documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


def _mib_text(n: int) -> str:
    if n >= GIB:
        return f"{n / GIB:.2f} GiB"
    return f"{n / MIB:.2f} MiB"


WEIGHTS_OOM_PREFIX = (
    "Failed to load model - not enough GPU memory. Try lowering --gpu-memory-utilization to "
    "free memory for weights, increasing --tensor-parallel-size, or using --quantization. See "
    "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more tips."
)
NO_KV_MEMORY = (
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
    "initializing the engine (this flag also controls CPU memory reservation on the CPU "
    "backend, despite its name). See "
    "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
)
AUTOFIT_IMPOSSIBLE = (
    "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single "
    "token. Try increasing `gpu_memory_utilization`."
)


def sampler_oom_message(num_reqs: int) -> str:
    """``gpu_model_runner.py:5988-5995``."""
    return (
        f"CUDA out of memory occurred when warming up sampler with {num_reqs} dummy requests. "
        "Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the "
        "engine."
    )


def block_size_message(block_size: int) -> str:
    """``v1/worker/utils.py:554`` for the FLASH_ATTN backend (kernel blocks: multiples of 16)."""
    return (
        f"No common block size for {block_size} "
        f"(FLASH_ATTN: [MultipleOf({FLASH_ATTN_BLOCK_MULTIPLE})])."
    )


def plan_memory(cfg: ResolvedConfig, extra_weight_bytes: int = 0) -> MemoryPlan:
    """Walk vLLM's GPU memory budget for ``cfg``; the first failure ends the walk.

    ``extra_weight_bytes`` is memory allocated with the weights that the domain's budget
    does not know of (the LoRA adapter slots, :func:`tui.sim.lora.lora_weight_bytes`).
    """
    hw = cfg.hardware
    total = hw.gpu.total_bytes
    util = cfg.gpu_memory_utilization
    free = total - hw.used_by_others - CUDA_CONTEXT_BYTES
    # Every number is the domain's (the pre-flight estimate computes the same budget); the
    # walk below only decides which of vLLM's checks fails first.
    b = budget.gpu_budget(cfg, total, free)
    if extra_weight_bytes:
        weights_plus = b.weights + extra_weight_bytes
        b = replace(
            b,
            weights=weights_plus,
            available_kv=budget.available_kv_bytes(
                b.requested,
                weights_plus + b.non_torch + b.activation_peak,
                b.cudagraph,
                cfg.kv_cache_memory_bytes,
            ),
        )
    requested, weights = b.requested, b.weights
    plan = MemoryPlan(
        kind="gpu",
        cfg=cfg,
        total=total,
        requested=requested,
        free_at_start=free,
        weights=weights,
        offloaded=b.offloaded,
        non_torch=0,
        activation_peak=0,
        cudagraph=0,
        available_kv=0,
        kv_from_flag=b.kv_from_flag,
        max_model_len=cfg.max_model_len,
    )

    def fail(kind: FailureKind, exc: str, msg: str, logged: str | None = None) -> MemoryPlan:
        return replace(plan, failure=StartupFailure(kind, exc, msg, logged))

    # 1. request_memory (skipped when the KV size is given explicitly).
    if cfg.kv_cache_memory_bytes is None and free < requested:
        return fail("free_memory", "ValueError", free_memory_message(free, total, util, requested))
    # 2. load_model: the tensor that does not fit (an MLP gate/up matrix) is what torch reports.
    if weights > free:
        s = cfg.entry.shape
        tp = cfg.tensor_parallel_size
        alloc = int(2 * s.intermediate_size * s.hidden_size / tp * min(cfg.dtype_bytes, 2))
        loaded = free - free % max(alloc, 1)
        oom = torch_oom_message(alloc, total, free - loaded, loaded + CUDA_CONTEXT_BYTES)
        logged = f"{WEIGHTS_OOM_PREFIX} (original error: {oom})"
        return fail("weights_oom", "torch.OutOfMemoryError", oom, logged)
    non_torch, activation = b.non_torch, b.activation_peak
    plan = replace(plan, non_torch=non_torch, activation_peak=activation)
    # 3. profile run: the peak must fit physically.
    if weights + non_torch + activation > free:
        num_reqs = min(cfg.max_num_seqs, cfg.max_num_batched_tokens)
        return fail("sampler_oom", "RuntimeError", sampler_oom_message(num_reqs))
    # 4. available KV memory (gpu_worker.py:740-744) or the explicit size.
    cudagraph, available = b.cudagraph, b.available_kv
    plan = replace(plan, cudagraph=cudagraph, available_kv=available)
    per_block = cfg.bytes_per_block
    bs = cfg.block_size
    override = cfg.num_gpu_blocks_override
    check_bytes = override * per_block if override else available
    if check_bytes <= 0:
        return fail("no_kv_memory", "ValueError", NO_KV_MEMORY)
    usable = kv.usable_for_check(check_bytes, per_block)
    mml = cfg.max_model_len
    if cfg.auto_fit:
        derived = cfg.derived_max_model_len
        fit = kv.estimate_max_model_len(usable, bs, per_block, derived)
        if fit <= 0:
            return fail("autofit_impossible", "ValueError", AUTOFIT_IMPOSSIBLE)
        if fit >= derived:
            message = (
                f"Auto-fit max_model_len: full model context length {derived} fits in "
                f"available KV cache memory ({_gib(usable)} GiB)"
            )
        else:
            message = (
                f"Auto-fit max_model_len: reduced from {derived} to {fit} to fit in available "
                f"KV cache memory ({_gib(usable)} GiB)"
            )
            mml = fit
        plan = replace(plan, auto_fit_message=message, max_model_len=mml)
    needed = kv.needed_bytes(mml, bs, per_block)
    if needed > usable:
        estimate = kv.estimate_max_model_len(usable, bs, per_block, mml)
        message = kv.kv_too_small_message(mml, needed, usable, estimate)
        return fail("kv_too_small", "ValueError", message)
    plan = replace(plan, capacity=kv.capacity(available, bs, per_block, mml, override))
    # 5. allocation: an explicit KV size may not fit the device.
    held = weights + non_torch + activation
    if held + plan.kv_allocated > free:
        oom = torch_oom_message(
            plan.kv_allocated, total, free - held, CUDA_CONTEXT_BYTES + weights + non_torch
        )
        return fail("kv_alloc_oom", "torch.OutOfMemoryError", oom)
    # 6. the attention backend must have a kernel block size dividing the block size.
    if bs % FLASH_ATTN_BLOCK_MULTIPLE:
        return fail("block_size", "ValueError", block_size_message(bs))
    return plan


def kv_cache_memory_hint(plan: MemoryPlan) -> str:
    """The INFO line suggesting ``--kv-cache-memory`` after capture (gpu_worker.py:1012-1034)."""
    total, requested = plan.total, plan.requested
    non_kv = plan.non_kv + plan.cudagraph
    fit = max(0, requested - non_kv)
    full = max(0, plan.free_at_start - non_kv - 150 * MIB)
    return (
        f"Free memory on device cuda:0 ({_gib(plan.free_at_start)}/{_gib(total)} GiB) on "
        f"startup. Desired GPU memory utilization is ({plan.cfg.gpu_memory_utilization}, "
        f"{_gib(requested)} GiB). Actual usage is {_gib(plan.weights)} GiB for weight, "
        f"{_gib(plan.activation_peak)} GiB for peak activation, {_gib(plan.non_torch)} GiB for "
        f"non-torch memory, and {_gib(plan.cudagraph)} GiB for CUDAGraph memory. Replace "
        f"gpu_memory_utilization config with `--kv-cache-memory={fit}` ({_gib(fit)} GiB) to fit "
        f"into requested memory, or `--kv-cache-memory={full}` ({_gib(full)} GiB) to fully "
        f"utilize gpu memory. Current kv cache memory in use is {_gib(plan.kv_allocated)} GiB."
    )
