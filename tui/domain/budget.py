"""vLLM's start-up memory budget as pure arithmetic, shared by the estimator and the simulator.

Follows ``vllm-0.32-reference.md``: default resolution (section 1.4, ``engine/arg_utils.py:
2894-2985,3129-3186``) and the worker's memory budget (section 2.1, GPU
``v1/worker/gpu_worker.py:533-762``, CPU ``v1/worker/cpu_worker.py:73-95,217-258``). The KV
formulas themselves are :mod:`tui.domain.kv`.

Two kinds of numbers live here:

- vLLM's arithmetic, exact: ``requested = ceil(total * utilization)``, the batch defaults,
  ``available_kv = requested - non_kv - cudagraph`` (or ``--kv-cache-memory-bytes``);
- calibrated approximations of what vLLM *measures* at start-up and a pre-flight check can
  only guess: the activation peak of the profile run, non-torch memory, the CUDA-graph pool,
  the CUDA context, and (CPU without an explicit KV size) the worker's resident memory. Each
  such function says so in its docstring, and :mod:`tui.domain.preflight` lists the ones an
  estimate used.

Pure: no I/O, no clock. The simulator (``tui/sim/memory.py``) runs its start-up on these
functions, so the pre-flight estimate and the simulator cannot disagree about a formula.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tui.domain import kv
from tui.domain.flags.serve import ServeFlags
from tui.domain.flags.vllm_defaults import (
    CPU_BLOCK_SIZE,
    GPU_BLOCK_SIZE,
    PERFORMANCE_MODE,
    PROVISIONED_DEFAULTS,
    BatchDefaults,
    DeviceKind,
    ServeDefaults,
    batch_defaults,
)

MIB = 2**20
GIB = 2**30

# -- calibrations (approximations of what vLLM measures at start-up) ---------------------------
CUDA_CONTEXT_BYTES = 300 * MIB  # CUDA context + cuBLAS handles, held before vLLM's snapshot
NON_TORCH_BYTES = 80 * MIB  # non-torch growth during the profile run (one GPU)
NCCL_BYTES = 200 * MIB  # extra non-torch memory with tensor/pipeline parallel groups
CPU_RUNTIME_RSS_BYTES = 1 * GIB  # a CPU worker's resident memory besides its weights
# (vllm-cpu-findings.md: the whole eager tree peaks at 1.8 GB with a ~1 MB model)

# -- vLLM constants (its defaults are declared in tui.domain.flags.vllm_defaults) ----------------
GPU_DEFAULT_BLOCK_SIZE = GPU_BLOCK_SIZE
CPU_DEFAULT_BLOCK_SIZE = CPU_BLOCK_SIZE
FLASH_ATTN_BLOCK_MULTIPLE = 16  # FLASH_ATTN kernel block sizes: MultipleOf(16)
CPU_BLOCK_MULTIPLE = 32  # platforms/cpu.py:295-299 warns otherwise

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
FP8_QUANT = frozenset(
    {
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
)
# A checkpoint's method and the kernels vLLM upgrades it to at run time.
COMPATIBLE_QUANT: dict[str, set[str]] = {
    "awq": {"awq", "awq_marlin", "auto_awq"},
    "gptq": {"gptq", "gptq_marlin", "auto_gptq"},
}


# -- default resolution (reference 1.4; the defaults themselves live in vllm_defaults) ---------
# BatchDefaults, batch_defaults and default_block_size are imported above and stay importable
# from here (the simulator's memory model uses them through this module).


def resolved_dtype(shape: kv.ModelShape, dtype_flag: str | None) -> str:
    """The torch dtype vLLM runs with: ``auto`` keeps bf16/fp16 checkpoints, fp32 -> bf16."""
    if dtype_flag in (None, "auto"):
        return "bfloat16" if shape.dtype in ("float32", "float") else shape.dtype
    return {"half": "float16", "float": "float32"}.get(dtype_flag, dtype_flag)


def resolved_quantization(flag: str | None, checkpoint: str | None) -> str | None:
    """The method that runs: the flag, else the checkpoint's; AWQ/GPTQ upgrade to Marlin."""
    quant = flag or checkpoint
    if checkpoint in COMPATIBLE_QUANT and quant in (None, checkpoint):
        quant = f"{checkpoint}_marlin"
    return quant


def resolve_batch(
    flags: ServeFlags, defaults: BatchDefaults, max_model_len: int, performance_mode: str
) -> tuple[int, int]:
    """``(max_num_seqs, max_num_batched_tokens)`` after ``engine/arg_utils.py:3129-3186``.

    Applied to the values the user left unset only: x2 in throughput mode; with chunked
    prefill off the token budget is at least ``max_model_len``; then the two are capped by
    each other.
    """
    chunked = flags.enable_chunked_prefill is not False
    mult = 2 if performance_mode == "throughput" else 1
    mns = flags.max_num_seqs
    mnbt = flags.max_num_batched_tokens
    if mnbt is None:
        mnbt = defaults.max_num_batched_tokens * mult
        if not chunked:
            mnbt = max(max_model_len, mnbt)
        mnbt = min((mns or defaults.max_num_seqs * mult) * max_model_len, mnbt)
    if mns is None:
        mns = min(defaults.max_num_seqs * mult, mnbt)
    return int(mns), int(mnbt)


@dataclass(frozen=True)
class EngineConfig:
    """The configuration vLLM would run with once every default is resolved.

    ``embedding_params`` is the parameter count of the input embedding and LM head (one
    matrix when tied): quantization leaves those in the model dtype.
    """

    shape: kv.ModelShape
    embedding_params: float
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
        """Devices one engine uses: TP x PP."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def rank_shape(self) -> kv.ModelShape:
        """The model as one pipeline stage sees it (its share of the layers)."""
        layers = math.ceil(self.shape.num_layers / self.pipeline_parallel_size)
        return replace(self.shape, num_layers=layers)

    @property
    def dtype_bytes(self) -> float:
        """Bytes per activation/unquantized weight element."""
        return kv.DTYPE_BYTES.get(self.dtype, 2)

    @property
    def kv_bytes(self) -> float:
        """Bytes per KV element (fp8 caches are 1)."""
        return kv.kv_dtype_bytes(self.shape, self.kv_cache_dtype, self.dtype)

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


def default_embedding_params(shape: kv.ModelShape, tied: bool = False) -> float:
    """Parameters of the input embedding and LM head (one matrix when tied)."""
    return float(shape.vocab_size * shape.hidden_size * (1 if tied else 2))


def resolve_engine(
    flags: ServeFlags,
    shape: kv.ModelShape,
    *,
    total_bytes: int,
    device_name: str = "",
    kind: DeviceKind = "gpu",
    checkpoint_quantization: str | None = None,
    embedding_params: float | None = None,
    performance_mode: str = PERFORMANCE_MODE,
    defaults: ServeDefaults = PROVISIONED_DEFAULTS,
) -> EngineConfig:
    """Apply vLLM's defaults to ``flags`` for ``shape`` on a device (reference 1.3 and 1.4).

    ``defaults``: those of the release that will serve (the provisioned one's when unknown).
    """
    derived = shape.max_position_embeddings
    mml_flag = flags.max_model_len
    auto_fit = mml_flag == -1
    max_model_len = derived if mml_flag in (None, -1) else int(mml_flag)
    tp = flags.tensor_parallel_size or 1
    pp = flags.pipeline_parallel_size or 1
    batch = batch_defaults(total_bytes, device_name, kind, tp * pp)
    mns, mnbt = resolve_batch(flags, batch, max_model_len, performance_mode)
    return EngineConfig(
        shape=shape,
        embedding_params=(
            default_embedding_params(shape) if embedding_params is None else embedding_params
        ),
        dtype=resolved_dtype(shape, flags.dtype),
        quantization=resolved_quantization(flags.quantization, checkpoint_quantization),
        kv_cache_dtype=flags.kv_cache_dtype or defaults.kv_cache_dtype,
        block_size=flags.block_size or defaults.block_size(kind),
        derived_max_model_len=derived,
        max_model_len=max_model_len,
        auto_fit=auto_fit,
        max_num_seqs=mns,
        max_num_batched_tokens=mnbt,
        enable_chunked_prefill=flags.enable_chunked_prefill is not False,
        enable_prefix_caching=flags.enable_prefix_caching is not False,
        enforce_eager=bool(flags.enforce_eager),
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        gpu_memory_utilization=_or(flags.gpu_memory_utilization, defaults.gpu_memory_utilization),
        cpu_offload_bytes=int((flags.cpu_offload_gb or 0.0) * GIB),
        kv_cache_memory_bytes=flags.kv_cache_memory_bytes,
        num_gpu_blocks_override=flags.num_gpu_blocks_override,
        max_logprobs=int(_or(flags.max_logprobs, defaults.max_logprobs)),
    )


def _or(value: float | None, default: float) -> float:
    """The flag's value when set, else the release's default."""
    return float(default if value is None else value)


# -- sizes ---------------------------------------------------------------------------------------
def weight_bytes(
    shape: kv.ModelShape, dtype_bytes: float, quantization: str | None, embedding_params: float
) -> float:
    """All weights in bytes: quantized linear layers, embeddings/LM head in the model dtype."""
    params = shape.param_count
    if quantization is None:
        return params * dtype_bytes
    per_param = ONLINE_QUANT_BYTES.get(quantization) or CHECKPOINT_QUANT_BYTES.get(
        quantization, 1.0
    )
    emb = min(embedding_params, params)
    return (params - emb) * per_param + emb * dtype_bytes


def rank_weights(cfg: EngineConfig) -> tuple[int, int]:
    """``(on_device, offloaded)`` weight bytes of one rank after ``--cpu-offload-gb``."""
    total = weight_bytes(cfg.shape, cfg.dtype_bytes, cfg.quantization, cfg.embedding_params)
    per_rank = int(total / cfg.world_size)
    offloaded = min(cfg.cpu_offload_bytes, per_rank)
    return per_rank - offloaded, offloaded


def requested_bytes(total_bytes: int, utilization: float) -> int:
    """``ceil(total * gpu_memory_utilization)`` (``v1/worker/utils.py:724-726``; CPU ``:73-76``)."""
    return math.ceil(total_bytes * utilization)


def activation_peak_bytes(cfg: EngineConfig) -> int:
    """Transient torch peak of the profile run (calibrated approximation).

    Forward: ``max_num_batched_tokens`` tokens through the widest layer (the gated MLP:
    hidden + 3 x intermediate, plus the QKV projection), per tensor-parallel rank. Sampler
    warm-up: fp32 logits for ``min(max_num_seqs, max_num_batched_tokens)`` dummy requests.
    vLLM counts the larger of the two, above the weights (``utils/mem_utils.py:312-321``).
    """
    s = cfg.shape
    tp = cfg.tensor_parallel_size
    width = (
        s.hidden_size
        + (3 * s.intermediate_size + (s.num_attention_heads + 2 * s.num_kv_heads) * s.head_dim) / tp
    )
    forward = cfg.max_num_batched_tokens * width * cfg.dtype_bytes
    sampler = min(cfg.max_num_seqs, cfg.max_num_batched_tokens) * s.vocab_size * 4 / tp
    return int(max(forward, sampler))


def non_torch_bytes(world_size: int) -> int:
    """Non-torch growth during profiling (cuBLAS workspaces; NCCL buffers when parallel).

    Calibrated approximation.
    """
    return NON_TORCH_BYTES + (NCCL_BYTES if world_size > 1 else 0)


def cudagraph_bytes(cfg: EngineConfig) -> int:
    """CUDA-graph pool estimate: the largest captured batch's activations on every layer.

    Calibrated approximation of ``profile_cudagraph_memory()`` (``gpu_worker.py:700-711``);
    0 with ``--enforce-eager``.
    """
    sizes = cfg.cudagraph_capture_sizes
    if not sizes:
        return 0
    s = cfg.rank_shape
    return int(8 * MIB + max(sizes) * s.hidden_size * cfg.dtype_bytes * s.num_layers)


def available_kv_bytes(
    requested: int, non_kv: int, cudagraph: int, kv_cache_memory_bytes: int | None
) -> int:
    """``requested - non_kv - cudagraph`` (``gpu_worker.py:740-744``), or the explicit size."""
    if kv_cache_memory_bytes is not None:
        return int(kv_cache_memory_bytes)
    return requested - non_kv - cudagraph


def cpu_available_kv_bytes(
    requested: int, process_rss: int, kv_cache_memory_bytes: int | None
) -> int:
    """CPU worker: the explicit size, else ``requested - RSS`` (``cpu_worker.py:217-258``)."""
    if kv_cache_memory_bytes is not None:
        return int(kv_cache_memory_bytes)
    return requested - process_rss


# -- the budget ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class MemoryBudget:
    """Every start-up memory figure of one rank, in bytes (what the log reports).

    GPU: ``free_at_start`` is the free memory once this process holds its CUDA context.
    CPU: ``non_torch`` holds the worker's resident memory besides weights (an estimate), and
    ``free_at_start`` the node's available memory when known.
    """

    kind: DeviceKind
    total: int
    requested: int
    free_at_start: int | None
    weights: int  # on the device, after CPU offload
    offloaded: int
    non_torch: int
    activation_peak: int
    cudagraph: int
    available_kv: int  # the value logged as "Available KV cache memory"
    kv_from_flag: bool

    @property
    def non_kv(self) -> int:
        """``non_kv_cache_memory``: weights + non-torch + activation peak."""
        return self.weights + self.non_torch + self.activation_peak


def gpu_budget(cfg: EngineConfig, total: int, free_at_start: int | None) -> MemoryBudget:
    """vLLM's GPU budget for ``cfg`` (reference 2.1 steps 1-4); no checks, just the numbers."""
    weights, offloaded = rank_weights(cfg)
    requested = requested_bytes(total, cfg.gpu_memory_utilization)
    non_torch = non_torch_bytes(cfg.world_size)
    activation = activation_peak_bytes(cfg)
    cudagraph = cudagraph_bytes(cfg)
    available = available_kv_bytes(
        requested, weights + non_torch + activation, cudagraph, cfg.kv_cache_memory_bytes
    )
    return MemoryBudget(
        kind="gpu",
        total=total,
        requested=requested,
        free_at_start=free_at_start,
        weights=weights,
        offloaded=offloaded,
        non_torch=non_torch,
        activation_peak=activation,
        cudagraph=cudagraph,
        available_kv=available,
        kv_from_flag=cfg.kv_cache_memory_bytes is not None,
    )


def cpu_budget(cfg: EngineConfig, total: int, available_at_start: int | None) -> MemoryBudget:
    """vLLM's CPU-worker budget: the explicit KV size, else ``requested - RSS`` (ref 2.1).

    The worker's RSS is estimated as the weights plus :data:`CPU_RUNTIME_RSS_BYTES`.
    """
    weights, offloaded = rank_weights(cfg)
    requested = requested_bytes(total, cfg.gpu_memory_utilization)
    runtime = CPU_RUNTIME_RSS_BYTES
    available = cpu_available_kv_bytes(requested, weights + runtime, cfg.kv_cache_memory_bytes)
    return MemoryBudget(
        kind="cpu",
        total=total,
        requested=requested,
        free_at_start=available_at_start,
        weights=weights,
        offloaded=offloaded,
        non_torch=runtime,
        activation_peak=0,
        cudagraph=0,
        available_kv=available,
        kv_from_flag=cfg.kv_cache_memory_bytes is not None,
    )
