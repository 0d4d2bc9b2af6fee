"""KV-cache arithmetic against the reference's worked example and the real CPU captures."""

from __future__ import annotations

from tui.domain.kv import (
    GIB,
    ModelShape,
    bytes_per_block,
    capacity,
    estimate_max_model_len,
    format_gib,
    kv_too_small_message,
    largest_fitting_len,
    needed_bytes,
    usable_for_check,
)

LLAMA_8B = ModelShape(
    name="meta-llama/Llama-3.1-8B-Instruct",
    num_layers=32,
    num_attention_heads=32,
    num_kv_heads=8,
    head_dim=128,
    hidden_size=4096,
    max_position_embeddings=131072,
    param_count=8.03e9,
)
# The tiny model of vllm-cpu-findings.md: 2 layers, 2 kv heads, head_dim 32, bf16.
TINY = ModelShape(
    name="tiny",
    num_layers=2,
    num_attention_heads=4,
    num_kv_heads=2,
    head_dim=32,
    hidden_size=128,
    max_position_embeddings=4096,
    param_count=1e6,
)


def test_reference_worked_example_llama_8b() -> None:
    # Reference 2.2: 2*8*128*2 = 4 KiB per token per layer, 128 KiB per token, 2 MiB per block.
    per_block = bytes_per_block(LLAMA_8B, block_size=16, kv_bytes=2)
    assert per_block == 2 * 2**20
    cap = capacity(10 * GIB, 16, per_block, max_model_len=4096)
    assert cap.num_blocks == 5120
    assert cap.kv_cache_size_tokens == 81920
    assert cap.max_concurrency == 20.0
    assert cap.log_line() == (
        "GPU KV cache size: 81,920 tokens, Maximum concurrency for 4,096 tokens per request: 20.00x"
    )


def test_cpu_capture_one_gib_line() -> None:
    # vllm-cpu-findings.md: 1 GiB -> "CPU KV cache size: 2,097,152 tokens ... 4,096 ...: 512.00x"
    per_block = bytes_per_block(TINY, block_size=128, kv_bytes=2)
    cap = capacity(GIB, 128, per_block, max_model_len=4096)
    assert cap.log_line("CPU") == (
        "CPU KV cache size: 2,097,152 tokens, Maximum concurrency for 4,096 tokens per request: "
        "512.00x"
    )


def test_estimated_max_len_matches_capture_a1() -> None:
    # fail_a1: --kv-cache-memory-bytes 16M, max_model_len 65536 -> "estimated ... is 32640".
    per_block = bytes_per_block(TINY, block_size=128, kv_bytes=2)
    available = usable_for_check(16 * 2**20, per_block)
    assert needed_bytes(65536, 128, per_block) > available
    assert estimate_max_model_len(available, 128, per_block, derived_max=131072) == 32640


def test_estimated_max_len_matches_capture_a2() -> None:
    # fail_a2: --num-gpu-blocks-override 8 -> estimated maximum 896 = (8 - 1) blocks * 128.
    per_block = bytes_per_block(TINY, block_size=128, kv_bytes=2)
    available = usable_for_check(8 * per_block, per_block)
    assert estimate_max_model_len(available, 128, per_block, derived_max=4096) == 896


def test_fp8_kv_halves_the_block() -> None:
    assert bytes_per_block(LLAMA_8B, 16, kv_bytes=1) * 2 == bytes_per_block(LLAMA_8B, 16, 2)


def test_tensor_parallel_splits_kv_heads() -> None:
    assert bytes_per_block(LLAMA_8B, 16, 2, tp=2) * 2 == bytes_per_block(LLAMA_8B, 16, 2, tp=1)
    # Never below one head per rank.
    assert bytes_per_block(LLAMA_8B, 16, 2, tp=16) == bytes_per_block(LLAMA_8B, 16, 2, tp=8)


def test_message_has_vllms_numbers() -> None:
    text = kv_too_small_message(65536, 32 * 2**20, 16 * 2**20 - 65536, 32640)
    assert "max seq len (65536), (0.03 GiB KV cache is needed" in text
    assert "available KV cache memory (0.02 GiB)" in text
    assert "estimated maximum model length is 32640. Try increasing" in text


def test_format_gib_is_vllms_rounding() -> None:
    assert format_gib(12 * GIB) == "12.0"
    assert format_gib(1.234567 * GIB) == "1.23"


def test_largest_fitting_len_rounds_down_to_block() -> None:
    assert largest_fitting_len(1136, 16) == 1136
    assert largest_fitting_len(1140, 32) == 1120


def test_shape_from_hf_config() -> None:
    cfg = {
        "num_attention_heads": 32,
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16",
    }
    shape = ModelShape.from_hf_config("x", cfg)
    assert shape.head_dim == 128
    assert bytes_per_block(shape, 16, 2) == bytes_per_block(LLAMA_8B, 16, 2)
    assert 7.9e9 < shape.param_count < 8.1e9  # Llama-3.1-8B has 8.03 B parameters
