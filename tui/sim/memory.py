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

Activation, non-torch and CUDA-graph sizes are calibrated approximations (documented on each
function); everything else is vLLM's arithmetic. The module is pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal

from tui.domain import kv
from tui.domain.flags import ServeFlags
from tui.sim.catalog import GIB, MIB, GpuSpec, ModelEntry

# Quantization methods vLLM can apply to an unquantized checkpoint at load time ("online"),
# and the weight bytes per parameter each gives. Everything else needs a quantized checkpoint.
ONLINE_QUANT_BYTES: dict[str, float] = {
    "fp8": 1.0,
    "fp8_per_tensor": 1.0,
    "fp8_per_block": 1.0,
    "fp8_per_channel": 1.0,
    "mxfp8": 1.03,
    "int8_per_channel_weight_only": 1.0,
    "experts_int8": 1.0,
    "nvfp4_per_token": 0.56,
    "online": 1.0,
}
# Pre-quantized checkpoint formats: 4-bit with group-128 scales/zeros, fp8, fp4.
CHECKPOINT_QUANT_BYTES: dict[str, float] = {
    "awq": 0.52,
    "auto_awq": 0.52,
    "awq_marlin": 0.52,
    "gptq": 0.52,
    "auto_gptq": 0.52,
    "gptq_marlin": 0.52,
    "moe_wna16": 0.52,
    "humming": 0.52,
    "compressed-tensors": 1.0,
    "modelopt": 1.0,
    "modelopt_mxfp8": 1.03,
    "modelopt_fp4": 0.56,
    "modelopt_mixed": 0.75,
    "fbgemm_fp8": 1.0,
    "fp_quant": 0.56,
    "quark": 1.0,
    "torchao": 1.0,
    "inc": 0.52,
    "mxfp4": 0.53,
    "gpt_oss_mxfp4": 0.53,
    "deepseek_v4_fp8": 1.0,
}
FP8_QUANT = {
    "fp8",
    "fp8_per_tensor",
    "fp8_per_block",
    "fp8_per_channel",
    "fbgemm_fp8",
    "modelopt",
    "compressed-tensors",
    "deepseek_v4_fp8",
    "mxfp8",
    "modelopt_mxfp8",
}
# A checkpoint's method and the kernels vLLM upgrades it to at run time.
_COMPATIBLE = {
    "awq": {"awq", "awq_marlin", "auto_awq"},
    "gptq": {"gptq", "gptq_marlin", "auto_gptq"},
}

CUDA_CONTEXT_BYTES = 300 * MIB  # CUDA context + cuBLAS handles, held before vLLM's snapshot
NON_TORCH_BYTES = 80 * MIB  # non-torch growth during the profile run (one GPU)
NCCL_BYTES = 200 * MIB  # extra non-torch memory with tensor/pipeline parallel groups
FLASH_ATTN_BLOCK_MULTIPLE = 16  # FLASH_ATTN kernel block sizes: MultipleOf(16)
GPU_DEFAULT_BLOCK_SIZE = 16  # config/cache.py:344-347


@dataclass(frozen=True)
class SimHardware:
    """The simulated machine: which GPU, how many, and what others already use on each."""

    gpu: GpuSpec
    num_gpus: int = 1
    used_by_others: int = 0  # bytes per GPU held by other processes (a desktop, WSL)


@dataclass(frozen=True)
class BatchDefaults:
    """``get_batch_defaults`` for the OpenAI server (``engine/arg_utils.py:2894-2985``)."""

    max_num_batched_tokens: int
    max_num_seqs: int


def batch_defaults(gpu: GpuSpec) -> BatchDefaults:
    """Reference 1.4: >=160 GiB 16384/1024; >=70 GiB and not A100 8192/1024; else 2048/256."""
    gib = gpu.total_bytes / GIB
    if gib >= 160:
        return BatchDefaults(16384, 1024)
    if gib >= 70 and "a100" not in gpu.name.lower():
        return BatchDefaults(8192, 1024)
    return BatchDefaults(2048, 256)


def resolved_dtype(entry: ModelEntry, dtype_flag: str | None) -> str:
    """The torch dtype vLLM runs with: ``auto`` keeps bf16/fp16 checkpoints, fp32 -> bf16."""
    if dtype_flag in (None, "auto"):
        return "bfloat16" if entry.shape.dtype in ("float32", "float") else entry.shape.dtype
    return {"half": "float16", "float": "float32"}.get(dtype_flag, dtype_flag)


@dataclass(frozen=True)
class ResolvedConfig:
    """The configuration vLLM would run with once every default is resolved."""

    flags: ServeFlags
    entry: ModelEntry
    hardware: SimHardware
    dtype: str
    quantization: str | None
    kv_cache_dtype: str
    block_size: int
    derived_max_model_len: int
    max_model_len: int  # the model's length when auto-fit is asked for (fixed up later)
    auto_fit: bool
    max_num_seqs: int
    max_num_batched_tokens: int
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    enforce_eager: bool
    tensor_parallel_size: int
    pipeline_parallel_size: int
    gpu_memory_utilization: float
    cpu_offload_bytes: int
    kv_cache_memory_bytes: int | None
    num_gpu_blocks_override: int | None
    max_logprobs: int

    @property
    def world_size(self) -> int:
        """GPUs one engine uses: TP x PP."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def rank_shape(self) -> kv.ModelShape:
        """The model as one pipeline stage sees it (its share of the layers)."""
        shape = self.entry.shape
        layers = math.ceil(shape.num_layers / self.pipeline_parallel_size)
        return replace(shape, num_layers=layers)

    @property
    def dtype_bytes(self) -> float:
        """Bytes per activation/unquantized weight element."""
        return kv.DTYPE_BYTES.get(self.dtype, 2)

    @property
    def kv_bytes(self) -> float:
        """Bytes per KV element (fp8 caches are 1)."""
        return kv.kv_dtype_bytes(self.entry.shape, self.kv_cache_dtype, self.dtype)

    @property
    def bytes_per_block(self) -> int:
        """One block's page bytes over this rank's layers (``kv.bytes_per_block``)."""
        return kv.bytes_per_block(
            self.rank_shape, self.block_size, self.kv_bytes, self.tensor_parallel_size
        )

    @property
    def kv_bytes_per_token(self) -> float:
        """KV bytes per token on one rank (all of its layers)."""
        return kv.bytes_per_token(self.rank_shape, self.kv_bytes, self.tensor_parallel_size)

    @property
    def cudagraph_capture_sizes(self) -> list[int]:
        """``[1,2,4]+range(8,256,8)+range(256,max+1,16)`` up to the max capture size.

        ``max = min(max_num_seqs * 2, 512)`` (``config/vllm.py:2354-2364``,
        ``config/compilation.py:703-704``); empty with ``--enforce-eager``.
        """
        if self.enforce_eager:
            return []
        top = min(self.max_num_seqs * 2, 512)
        sizes = [1, 2, 4, *range(8, 256, 8), *range(256, top + 1, 16)]
        return [s for s in sizes if s <= top]


def resolve(
    flags: ServeFlags, entry: ModelEntry, hardware: SimHardware, performance_mode: str = "balanced"
) -> ResolvedConfig:
    """Apply vLLM's defaults to ``flags`` (reference 1.3 and 1.4)."""
    derived = entry.shape.max_position_embeddings
    mml_flag = flags.max_model_len
    auto_fit = mml_flag == -1
    max_model_len = derived if mml_flag in (None, -1) else int(mml_flag)
    chunked = flags.enable_chunked_prefill is not False
    defaults = batch_defaults(hardware.gpu)
    mult = 2 if performance_mode == "throughput" else 1
    mns = flags.max_num_seqs
    mnbt = flags.max_num_batched_tokens
    # engine/arg_utils.py:3129-3186, applied to the values the user left unset only.
    if mnbt is None:
        mnbt = defaults.max_num_batched_tokens * mult
        if not chunked:
            mnbt = max(max_model_len, mnbt)
        mnbt = min((mns or defaults.max_num_seqs * mult) * max_model_len, mnbt)
    if mns is None:
        mns = min(defaults.max_num_seqs * mult, mnbt)
    quant = flags.quantization or entry.checkpoint_quantization
    if entry.checkpoint_quantization in _COMPATIBLE and quant in (
        None,
        entry.checkpoint_quantization,
    ):
        quant = entry.checkpoint_quantization + "_marlin"  # vLLM upgrades AWQ/GPTQ to Marlin
    return ResolvedConfig(
        flags=flags,
        entry=entry,
        hardware=hardware,
        dtype=resolved_dtype(entry, flags.dtype),
        quantization=quant,
        kv_cache_dtype=flags.kv_cache_dtype or "auto",
        block_size=flags.block_size or GPU_DEFAULT_BLOCK_SIZE,
        derived_max_model_len=derived,
        max_model_len=max_model_len,
        auto_fit=auto_fit,
        max_num_seqs=int(mns),
        max_num_batched_tokens=int(mnbt),
        enable_chunked_prefill=chunked,
        enable_prefix_caching=flags.enable_prefix_caching is not False,
        enforce_eager=bool(flags.enforce_eager),
        tensor_parallel_size=flags.tensor_parallel_size or 1,
        pipeline_parallel_size=flags.pipeline_parallel_size or 1,
        gpu_memory_utilization=float(flags.effective("gpu_memory_utilization")),
        cpu_offload_bytes=int((flags.cpu_offload_gb or 0.0) * GIB),
        kv_cache_memory_bytes=flags.kv_cache_memory_bytes,
        num_gpu_blocks_override=flags.num_gpu_blocks_override,
        max_logprobs=int(flags.effective("max_logprobs")),
    )


# -- sizes ----------------------------------------------------------------------------------
def weight_bytes(entry: ModelEntry, dtype_bytes: float, quantization: str | None) -> float:
    """All weights in bytes: quantized linear layers, embeddings/LM head in the model dtype."""
    params = entry.shape.param_count
    if quantization is None:
        return params * dtype_bytes
    per_param = ONLINE_QUANT_BYTES.get(quantization) or CHECKPOINT_QUANT_BYTES.get(
        quantization, 1.0
    )
    emb = min(entry.embedding_params, params)
    return (params - emb) * per_param + emb * dtype_bytes


def activation_peak_bytes(cfg: ResolvedConfig) -> int:
    """Transient torch peak of the profile run (calibrated approximation).

    Forward: ``max_num_batched_tokens`` tokens through the widest layer (the gated MLP:
    hidden + 3 x intermediate, plus the QKV projection), per tensor-parallel rank. Sampler
    warm-up: fp32 logits for ``min(max_num_seqs, max_num_batched_tokens)`` dummy requests.
    vLLM counts the larger of the two, above the weights (``utils/mem_utils.py:312-321``).
    """
    s = cfg.entry.shape
    tp = cfg.tensor_parallel_size
    width = (
        s.hidden_size
        + (3 * s.intermediate_size + (s.num_attention_heads + 2 * s.num_kv_heads) * s.head_dim) / tp
    )
    forward = cfg.max_num_batched_tokens * width * cfg.dtype_bytes
    sampler = min(cfg.max_num_seqs, cfg.max_num_batched_tokens) * s.vocab_size * 4 / tp
    return int(max(forward, sampler))


def non_torch_bytes(cfg: ResolvedConfig) -> int:
    """Non-torch growth during profiling (cuBLAS workspaces; NCCL buffers when parallel)."""
    return NON_TORCH_BYTES + (NCCL_BYTES if cfg.world_size > 1 else 0)


def cudagraph_bytes(cfg: ResolvedConfig) -> int:
    """CUDA-graph pool estimate: the largest captured batch's activations on every layer."""
    sizes = cfg.cudagraph_capture_sizes
    if not sizes:
        return 0
    s = cfg.rank_shape
    return int(8 * MIB + max(sizes) * s.hidden_size * cfg.dtype_bytes * s.num_layers)


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
class MemoryPlan:
    """Everything the startup log reports about memory, per GPU (rank 0), in bytes."""

    cfg: ResolvedConfig
    total: int
    requested: int
    free_at_start: int
    weights: int  # on the GPU, after CPU offload
    offloaded: int
    non_torch: int
    activation_peak: int
    cudagraph: int
    available_kv: int  # the value logged as "Available KV cache memory"
    kv_from_flag: bool
    max_model_len: int  # final (after auto-fit)
    capacity: kv.KvCapacity | None = None
    auto_fit_message: str | None = None
    failure: StartupFailure | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def non_kv(self) -> int:
        """``non_kv_cache_memory``: weights + non-torch + activation peak."""
        return self.weights + self.non_torch + self.activation_peak

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


def plan_memory(cfg: ResolvedConfig) -> MemoryPlan:
    """Walk vLLM's GPU memory budget for ``cfg``; the first failure ends the walk."""
    hw = cfg.hardware
    total = hw.gpu.total_bytes
    util = cfg.gpu_memory_utilization
    requested = math.ceil(total * util)
    free = total - hw.used_by_others - CUDA_CONTEXT_BYTES
    per_rank = int(weight_bytes(cfg.entry, cfg.dtype_bytes, cfg.quantization) / cfg.world_size)
    offloaded = min(cfg.cpu_offload_bytes, per_rank)
    weights = per_rank - offloaded
    plan = MemoryPlan(
        cfg=cfg,
        total=total,
        requested=requested,
        free_at_start=free,
        weights=weights,
        offloaded=offloaded,
        non_torch=0,
        activation_peak=0,
        cudagraph=0,
        available_kv=0,
        kv_from_flag=cfg.kv_cache_memory_bytes is not None,
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
    non_torch = non_torch_bytes(cfg)
    activation = activation_peak_bytes(cfg)
    plan = replace(plan, non_torch=non_torch, activation_peak=activation)
    # 3. profile run: the peak must fit physically.
    if weights + non_torch + activation > free:
        num_reqs = min(cfg.max_num_seqs, cfg.max_num_batched_tokens)
        return fail("sampler_oom", "RuntimeError", sampler_oom_message(num_reqs))
    cudagraph = cudagraph_bytes(cfg)
    # 4. available KV memory (gpu_worker.py:740-744) or the explicit size.
    if cfg.kv_cache_memory_bytes is not None:
        available = int(cfg.kv_cache_memory_bytes)
    else:
        available = requested - (weights + non_torch + activation) - cudagraph
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
