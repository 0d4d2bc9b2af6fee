"""The pre-flight check: how much KV cache a launch will get, before launching it.

``estimate(shape, flags, device)`` walks vLLM's start-up budget (:mod:`tui.domain.budget`,
reference section 2.1) and the KV arithmetic (:mod:`tui.domain.kv`, section 2.2) for a model
shape read from its ``config.json``, the flags and the device's memory. It predicts the
number vLLM logs as ``<DEV> KV cache size: N tokens`` and whether one ``max_model_len``
request fits (vLLM's check, ``v1/core/kv_cache_utils.py:1019-1040``), and words a warning
when it does not.

Exact where vLLM's sizing is arithmetic: ``--kv-cache-memory-bytes`` (GPU or CPU) and
``--num-gpu-blocks-override``. Otherwise the KV bytes depend on what vLLM measures at
start-up (activation peak, non-torch memory, the CUDA-graph pool; the CPU worker's resident
memory); the estimate then uses the budget module's calibrated guesses and lists each in
``assumptions``. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tui.domain import budget, kv
from tui.domain.budget import DeviceKind, EngineConfig, MemoryBudget
from tui.domain.flags.serve import ServeFlags
from tui.domain.flags.vllm_defaults import PERFORMANCE_MODE

GIB = 2**30
MIB = 2**20


@dataclass(frozen=True)
class DeviceMemory:
    """The device a launch will use: its total memory and what is free right now.

    ``kind`` ``"gpu"``: one GPU (each rank's, when parallel). ``"cpu"``: the CPU build of
    vLLM, whose "device" is the NUMA node's RAM. ``free_bytes`` is ``None`` when unknown.
    """

    total_bytes: int
    free_bytes: int | None = None
    kind: DeviceKind = "gpu"
    name: str = ""

    def __post_init__(self) -> None:
        if self.total_bytes <= 0:
            raise ValueError(f"total_bytes must be > 0, got {self.total_bytes}")
        if self.kind not in ("gpu", "cpu"):
            raise ValueError(f"kind must be 'gpu' or 'cpu', got {self.kind!r}")


@dataclass(frozen=True)
class KvEstimate:
    """What the launch is expected to get, and what to fix first if it will not start.

    ``kv_bytes``: the available KV memory (vLLM's "Available KV cache memory").
    ``kv_tokens``: the number vLLM logs (:attr:`tui.domain.kv.KvCapacity.kv_cache_size_tokens`).
    ``fits``: one request of ``max_model_len`` fits the KV cache (vLLM's start-up check).
    ``largest_fitting_max_model_len``: vLLM's own estimate of the longest length that fits,
    capped at the model's maximum. ``exact``: no calibration guess went into ``kv_bytes``.
    """

    kv_bytes: int
    num_blocks: int
    kv_tokens: int
    max_concurrency: float
    fits: bool
    largest_fitting_max_model_len: int
    warnings: list[str] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    max_model_len: int = 0
    block_size: int = 0
    bytes_per_block: int = 0
    exact: bool = False
    device_kind: DeviceKind = "gpu"
    budget: MemoryBudget | None = None

    def error_vs(self, logged_tokens: int) -> float:
        """Relative error of ``kv_tokens`` against the tokens the server logged."""
        if logged_tokens <= 0:
            raise ValueError(f"logged_tokens must be > 0, got {logged_tokens}")
        return (self.kv_tokens - logged_tokens) / logged_tokens

    def summary(self) -> str:
        """One line for a form or a card: tokens, concurrency, KV GiB."""
        approx = "" if self.exact else "~"
        return (
            f"KV estimate: {approx}{self.kv_tokens:,} tokens, {self.max_concurrency:.2f}x at "
            f"{self.max_model_len:,} tokens ({_gib(self.kv_bytes)} GiB)"
        )


def _gib(n: float) -> str:
    return f"{n / GIB:.2f}"


def estimate(
    shape: kv.ModelShape,
    flags: ServeFlags,
    device: DeviceMemory,
    *,
    checkpoint_quantization: str | None = None,
    embedding_params: float | None = None,
    performance_mode: str = PERFORMANCE_MODE,
) -> KvEstimate:
    """Estimate the KV cache ``flags`` get for ``shape`` on ``device`` (vLLM 0.32's formula).

    ``checkpoint_quantization`` is the checkpoint's ``quantization_config.quant_method``
    (AWQ/GPTQ weights are a quarter of bf16's); ``embedding_params`` the embedding + LM head
    parameter count (default: two untied ``vocab x hidden`` matrices).
    """
    cfg = budget.resolve_engine(
        flags,
        shape,
        total_bytes=device.total_bytes,
        device_name=device.name,
        kind=device.kind,
        checkpoint_quantization=checkpoint_quantization,
        embedding_params=embedding_params,
        performance_mode=performance_mode,
    )
    warnings: list[str] = []
    assumptions: list[str] = []
    if device.kind == "cpu":
        b = budget.cpu_budget(cfg, device.total_bytes, device.free_bytes)
        _cpu_checks(cfg, b, device, warnings, assumptions)
    else:
        free = None
        if device.free_bytes is not None:
            free = device.free_bytes - budget.CUDA_CONTEXT_BYTES
        b = budget.gpu_budget(cfg, device.total_bytes, free)
        _gpu_checks(cfg, b, device, warnings, assumptions)
    exact = cfg.kv_cache_memory_bytes is not None or cfg.num_gpu_blocks_override is not None
    if exact:
        assumptions = [a for a in assumptions if not a.startswith(_KV_GUESS)]
    return _kv_outcome(cfg, b, exact, warnings, assumptions)


_KV_GUESS = "KV bytes use"  # the prefix of assumptions that only matter for measured sizing


def _gpu_checks(
    cfg: EngineConfig,
    b: MemoryBudget,
    device: DeviceMemory,
    warnings: list[str],
    assumptions: list[str],
) -> None:
    """vLLM's GPU start-up checks before the KV cache (reference 2.1), as warnings."""
    util = cfg.gpu_memory_utilization
    free = b.free_at_start
    if free is None:
        assumptions.append("free GPU memory unknown: assumed the whole device is free")
    else:
        if cfg.kv_cache_memory_bytes is None and free < b.requested:
            warnings.append(
                f"only {_gib(free)} GiB free on {device.name or 'the GPU'} (after the CUDA "
                f"context), below the {_gib(b.requested)} GiB that --gpu-memory-utilization "
                f"{util} asks for: vLLM refuses to start. Lower the utilization or free the GPU"
            )
        elif b.weights > free:
            warnings.append(
                f"weights need {_gib(b.weights)} GiB per GPU but only {_gib(free)} GiB is free: "
                "out of memory while loading. Use --quantization, --cpu-offload-gb or more GPUs"
            )
        elif b.non_kv > free:
            warnings.append(
                f"the profile run needs about {_gib(b.non_kv)} GiB (weights + activations) but "
                f"only {_gib(free)} GiB is free: lower --max-num-batched-tokens/--max-num-seqs"
            )
        elif cfg.kv_cache_memory_bytes is not None and b.non_kv + b.available_kv > free:
            warnings.append(
                f"--kv-cache-memory-bytes {_gib(b.available_kv)} GiB does not fit next to "
                f"{_gib(b.non_kv)} GiB of weights and activations in {_gib(free)} GiB free"
            )
    if cfg.block_size % budget.FLASH_ATTN_BLOCK_MULTIPLE:
        warnings.append(
            f"block_size {cfg.block_size}: no attention kernel for it on GPU (FLASH_ATTN needs "
            f"a multiple of {budget.FLASH_ATTN_BLOCK_MULTIPLE})"
        )
    assumptions.append(
        f"weights {_gib(b.weights)} GiB per GPU from the config's parameter count"
        + (f" ({cfg.quantization})" if cfg.quantization else f" ({cfg.dtype})")
    )
    assumptions.append(
        f"{_KV_GUESS} a calibrated guess of the profile run's activation peak: "
        f"{_gib(b.activation_peak)} GiB at {cfg.max_num_batched_tokens} batched tokens "
        f"(vLLM measures it)"
    )
    assumptions.append(
        f"{_KV_GUESS} a calibrated guess of non-torch memory: {b.non_torch / MIB:.0f} MiB"
    )
    if b.cudagraph:
        assumptions.append(
            f"{_KV_GUESS} a calibrated guess of the CUDA-graph pool: {_gib(b.cudagraph)} GiB "
            f"(largest capture size {max(cfg.cudagraph_capture_sizes)}; 0 with --enforce-eager)"
        )


def _cpu_checks(
    cfg: EngineConfig,
    b: MemoryBudget,
    device: DeviceMemory,
    warnings: list[str],
    assumptions: list[str],
) -> None:
    """The CPU worker's checks (``v1/worker/cpu_worker.py:73-95,217-258``), as warnings."""
    avail = b.free_at_start
    if cfg.kv_cache_memory_bytes is None:
        if avail is not None and b.requested > avail:
            warnings.append(
                f"--gpu-memory-utilization {cfg.gpu_memory_utilization} asks for "
                f"{_gib(b.requested)} GiB of the node's {_gib(b.total)} GiB but only "
                f"{_gib(avail)} GiB is available: vLLM's CPU backend refuses to start. Pass "
                "--kv-cache-memory-bytes (e.g. 1G) or a lower utilization"
            )
        assumptions.append(
            f"{_KV_GUESS} a guess of the CPU worker's resident memory: "
            f"{_gib(b.non_torch + b.weights)} GiB (weights + "
            f"{budget.CPU_RUNTIME_RSS_BYTES / GIB:.0f} GiB runtime); vLLM measures it"
        )
        if avail is None:
            assumptions.append("available node memory unknown")
    elif avail is not None and b.available_kv > avail:
        warnings.append(
            f"--kv-cache-memory-bytes {_gib(b.available_kv)} GiB is more than the "
            f"{_gib(avail)} GiB available on the node: vLLM's CPU backend refuses to start"
        )
    if cfg.block_size % budget.CPU_BLOCK_MULTIPLE:
        warnings.append(
            f"block_size {cfg.block_size}: the CPU backend wants a multiple of "
            f"{budget.CPU_BLOCK_MULTIPLE} (other sizes fail or run slowly)"
        )


def _kv_outcome(
    cfg: EngineConfig,
    b: MemoryBudget,
    exact: bool,
    warnings: list[str],
    assumptions: list[str],
) -> KvEstimate:
    """Blocks, capacity and the max_model_len check (``kv_cache_utils.py:1009-1040,2369-2483``)."""
    per_block = cfg.bytes_per_block
    bs = cfg.block_size
    override = cfg.num_gpu_blocks_override
    check_bytes = override * per_block if override else b.available_kv
    usable = kv.usable_for_check(check_bytes, per_block)
    derived = cfg.derived_max_model_len
    largest = kv.estimate_max_model_len(usable, bs, per_block, derived)
    mml = cfg.max_model_len
    if cfg.auto_fit and largest > 0:
        mml = min(derived, largest)
    elif cfg.max_model_len > derived:
        warnings.append(
            f"max_model_len {mml} is above the model's {derived} (max_position_embeddings): "
            "vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
        )
    if check_bytes <= 0:
        capacity = kv.KvCapacity(0, bs, per_block, mml)
        fits = False
        if cfg.auto_fit:
            warnings.append("max_model_len auto: not even one token of KV fits")
        warnings.append(_no_kv_message(cfg, b))
    else:
        capacity = kv.capacity(b.available_kv, bs, per_block, mml, override)
        fits = kv.needed_bytes(mml, bs, per_block) <= usable
        if not fits:
            about = "" if exact else "about "
            warnings.append(
                f"max_model_len {mml} cannot fit: {about}{capacity.num_blocks * bs:,} tokens of "
                f"KV; largest that fits: {largest}"
            )
    return KvEstimate(
        kv_bytes=b.available_kv,
        num_blocks=capacity.num_blocks,
        kv_tokens=capacity.kv_cache_size_tokens if capacity.num_blocks > 0 else 0,
        max_concurrency=capacity.max_concurrency if capacity.num_blocks > 0 else 0.0,
        fits=fits,
        largest_fitting_max_model_len=max(0, largest),
        warnings=warnings,
        assumptions=assumptions,
        max_model_len=mml,
        block_size=bs,
        bytes_per_block=per_block,
        exact=exact,
        device_kind=b.kind,
        budget=b,
    )


def _no_kv_message(cfg: EngineConfig, b: MemoryBudget) -> str:
    """Why no KV memory is left, with the budget's parts."""
    if cfg.num_gpu_blocks_override is not None or cfg.kv_cache_memory_bytes is not None:
        return "no memory for the KV cache: the explicit KV size is 0"
    if b.kind == "cpu":
        return (
            f"no memory left for the KV cache: the CPU worker's ~{_gib(b.weights + b.non_torch)} "
            f"GiB exceed the {_gib(b.requested)} GiB requested. Pass --kv-cache-memory-bytes"
        )
    parts = f"weights {_gib(b.weights)} + activations {_gib(b.activation_peak)}"
    if b.cudagraph:
        parts += f" + CUDA graphs {_gib(b.cudagraph)}"
    return (
        f"no memory left for the KV cache: {parts} GiB use up the {_gib(b.requested)} GiB that "
        f"--gpu-memory-utilization {cfg.gpu_memory_utilization} gives. Raise it, quantize, or "
        "lower --max-num-batched-tokens"
    )
