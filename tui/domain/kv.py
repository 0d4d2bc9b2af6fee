"""KV-cache arithmetic of vLLM v1, shared by the pre-flight estimate and the simulator.

Every formula cites ``vllm-0.32-reference.md`` section 2 (which cites vLLM 0.32.0's
``v1/kv_cache_interface.py`` and ``v1/core/kv_cache_utils.py``). The simulator imports this
module, so the estimator and the simulator can never disagree about the formula.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GIB = 2**30

# Bytes per element of each model/KV dtype name that a flag can carry.
DTYPE_BYTES: dict[str, float] = {
    "float32": 4,
    "float": 4,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "fp8_ds_mla": 1,
    "fp8_per_token_head": 1,
    "int8_per_token_head": 1,
    "int4_per_token_head": 0.5,
    "nvfp4": 0.5,
    "nvfp4_4over6": 0.5,
    "nvfp4_ds_mla": 0.5,
    "ultraquant_4bit": 0.5,
    "turboquant_3bit_nc": 0.375,
    "turboquant_4bit_nc": 0.5,
    "turboquant_k3v4_nc": 0.4375,
    "turboquant_k8v4": 0.75,
}


@dataclass(frozen=True)
class ModelShape:
    """The parts of a HF ``config.json`` that size the KV cache and the weights."""

    name: str
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    hidden_size: int
    max_position_embeddings: int
    param_count: float  # number of parameters (for weight memory)
    dtype: str = "bfloat16"  # the checkpoint's torch_dtype
    vocab_size: int = 32000
    intermediate_size: int = 0

    @classmethod
    def from_hf_config(cls, name: str, config: dict[str, object]) -> ModelShape:
        """Read a HF ``config.json`` dict (Llama-style keys; text_config unwrapped)."""
        cfg = config.get("text_config", config)
        assert isinstance(cfg, dict)
        heads = int(cfg["num_attention_heads"])
        hidden = int(cfg["hidden_size"])
        head_dim = int(cfg.get("head_dim") or hidden // heads)
        layers = int(cfg["num_hidden_layers"])
        kv_heads = int(cfg.get("num_key_value_heads") or heads)
        inter = int(cfg.get("intermediate_size") or 4 * hidden)
        vocab = int(cfg.get("vocab_size") or 32000)
        # Llama-style count: attention (q, o full; k, v by kv heads), gated MLP, embeddings.
        attn = hidden * head_dim * (2 * heads + 2 * kv_heads)
        mlp = 3 * hidden * inter
        params = layers * (attn + mlp) + 2 * vocab * hidden
        return cls(
            name=name,
            num_layers=layers,
            num_attention_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            hidden_size=hidden,
            max_position_embeddings=int(cfg.get("max_position_embeddings") or 2048),
            param_count=float(params),
            dtype=str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"),
            vocab_size=vocab,
            intermediate_size=inter,
        )


def model_dtype_bytes(shape: ModelShape, dtype_flag: str | None) -> float:
    """Bytes per weight element for ``--dtype`` (``auto`` keeps the checkpoint's)."""
    name = shape.dtype if dtype_flag in (None, "auto") else dtype_flag
    return DTYPE_BYTES.get(name or "bfloat16", 2)


def kv_dtype_bytes(shape: ModelShape, kv_cache_dtype: str | None, dtype_flag: str | None) -> float:
    """Bytes per KV element: ``auto`` is the model dtype, fp8 variants are 1 (ref 2.2)."""
    if kv_cache_dtype in (None, "auto"):
        return model_dtype_bytes(shape, dtype_flag)
    return DTYPE_BYTES.get(kv_cache_dtype, 2)


def kv_heads_per_rank(shape: ModelShape, tp: int) -> int:
    """``max(1, total_kv_heads // tp)`` (``config/model.py:1650-1670``)."""
    return max(1, shape.num_kv_heads // max(1, tp))


def bytes_per_token(shape: ModelShape, kv_bytes: float, tp: int = 1) -> float:
    """KV bytes one token takes across all layers on one rank: ``2·kv_heads·head_dim·bytes·L``."""
    return 2 * kv_heads_per_rank(shape, tp) * shape.head_dim * kv_bytes * shape.num_layers


def bytes_per_block(shape: ModelShape, block_size: int, kv_bytes: float, tp: int = 1) -> int:
    """Page bytes of one block summed over layers (``v1/kv_cache_interface.py:528-560``)."""
    return math.ceil(bytes_per_token(shape, kv_bytes, tp) * block_size)


@dataclass(frozen=True)
class KvCapacity:
    """What vLLM derives from the KV memory it has (ref 2.2)."""

    num_blocks: int
    block_size: int
    bytes_per_block: int
    max_model_len: int

    @property
    def blocks_per_request(self) -> int:
        """``cdiv(max_model_len, block_size)``."""
        return -(-self.max_model_len // self.block_size)

    @property
    def max_concurrency(self) -> float:
        """``num_blocks / blocks_per_request``."""
        return self.num_blocks / self.blocks_per_request

    @property
    def kv_cache_size_tokens(self) -> int:
        """``int(max_concurrency * max_model_len)``: the number in the startup log line."""
        return int(self.max_concurrency * self.max_model_len)

    def log_line(self, device: str = "GPU") -> str:
        """The INFO line vLLM prints (``kv_cache_utils.py:2327-2334``)."""
        return (
            f"{device} KV cache size: {self.kv_cache_size_tokens:,} tokens, Maximum concurrency "
            f"for {self.max_model_len:,} tokens per request: {self.max_concurrency:.2f}x"
        )


def capacity(
    available_bytes: int,
    block_size: int,
    per_block: int,
    max_model_len: int,
    num_gpu_blocks_override: int | None = None,
) -> KvCapacity:
    """``num_blocks = available // bytes_per_block``, or the override (``:1627-1628``)."""
    blocks = available_bytes // per_block if per_block > 0 else 0
    if num_gpu_blocks_override:
        blocks = num_gpu_blocks_override
    return KvCapacity(blocks, block_size, per_block, max_model_len)


def needed_bytes(max_model_len: int, block_size: int, per_block: int) -> int:
    """Memory one request of ``max_model_len`` needs: ``cdiv(len, block)·page`` (ref 2.2)."""
    return -(-max_model_len // block_size) * per_block


def usable_for_check(available_bytes: int, per_block: int) -> int:
    """Capacity checks leave out BlockPool's null block (``kv_cache_utils.py:2627-2633``)."""
    return available_bytes - per_block


def estimate_max_model_len(
    available_bytes: int, block_size: int, per_block: int, derived_max: int
) -> int:
    """The largest max_model_len whose one request fits (vLLM's binary search, in closed form).

    vLLM searches ``[1, derived_max]`` for the largest length with
    ``cdiv(len, block)·page <= available`` (``kv_cache_utils.py:2369-2411``); that is whole
    blocks times the block size, capped at the model's own maximum.
    """
    if per_block <= 0 or available_bytes <= 0:
        return 0
    return min(derived_max, (available_bytes // per_block) * block_size)


def largest_fitting_len(kv_tokens: int, block_size: int) -> int:
    """Largest max_model_len that fits in ``kv_tokens``, rounded down to the block size."""
    if block_size <= 0:
        return kv_tokens
    return (kv_tokens // block_size) * block_size


def format_gib(n_bytes: float) -> str:
    """vLLM's ``format_gib``: ``str(round(b / 2**30, 2))`` (``utils/mem_utils.py:30-31``)."""
    return str(round(n_bytes / GIB, 2))


def kv_too_small_message(max_model_len: int, needed: int, available: int, estimated: int) -> str:
    """vLLM's exact text when one max-length request does not fit (``:1019-1040``)."""
    estimated_msg = (
        f"Based on the available memory, the estimated maximum model length is {estimated}. "
        if estimated > 0
        else ""
    )
    return (
        f"To serve at least one request with the model's max seq len ({max_model_len}), "
        f"({format_gib(needed)} GiB KV cache is needed, which is larger than the available KV "
        f"cache memory ({format_gib(available)} GiB). {estimated_msg}Try increasing "
        "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or "
        "decreasing `max_model_len` when initializing the engine. See "
        "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
    )
