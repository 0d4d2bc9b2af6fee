"""The simulator's hardware and model catalog: GPUs by public figures, models by real shapes.

GPU figures are the vendors' public datasheet numbers, rounded: memory bandwidth, dense
(non-sparse) tensor throughput, host link. ``total_bytes`` is what CUDA reports as the
device's total (a little under the marketing size, e.g. "9.77 GiB" for a 10 GB RTX 3080, as
torch's out-of-memory messages print it). Models are described by the fields of their
Hugging Face ``config.json`` as :class:`tui.domain.kv.ModelShape`, so the KV arithmetic is the
domain's and cannot drift from the console's estimator.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tui.domain.kv import ModelShape
from tui.sim.model_files import as_path

GIB = 2**30
MIB = 2**20


@dataclass(frozen=True)
class GpuSpec:
    """One simulated GPU model.

    ``fp8_tflops`` is 0 when the chip has no FP8 tensor cores (Ampere): vLLM then runs FP8
    checkpoints as weight-only FP8 through the Marlin kernel, at FP16 compute speed.
    """

    key: str
    name: str  # as NVML / torch report it
    total_bytes: int
    bandwidth_gbs: float  # GB/s (decimal), HBM/GDDR peak
    fp16_tflops: float  # dense tensor TFLOPS, FP16/BF16 inputs
    fp8_tflops: float  # dense tensor TFLOPS with FP8 inputs; 0 = no FP8 compute
    host_link_gbs: float  # GB/s host<->device (PCIe), what CPU-offloaded weights cross
    tdp_w: float
    idle_w: float
    compute_capability: str
    pci_bus_id: str = "00000000:01:00.0"

    @property
    def memory_gib(self) -> float:
        """Total memory in GiB."""
        return self.total_bytes / GIB

    @property
    def supports_fp8(self) -> bool:
        """Whether FP8 matmuls run natively (Ada, Hopper and newer)."""
        return self.fp8_tflops > 0

    def uuid(self, index: int) -> str:
        """A stable, fake-but-well-formed ``GPU-...`` UUID for device ``index``."""
        return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"vtc-sim/{self.key}/{index}"))


def _mib(n: int) -> int:
    return n * MIB


GPUS: dict[str, GpuSpec] = {
    g.key: g
    for g in (
        GpuSpec(
            key="rtx3080-10gb",
            name="NVIDIA GeForce RTX 3080",
            total_bytes=_mib(10004),
            bandwidth_gbs=760.0,
            fp16_tflops=119.0,
            fp8_tflops=0.0,
            host_link_gbs=25.0,
            tdp_w=320.0,
            idle_w=25.0,
            compute_capability="8.6",
        ),
        GpuSpec(
            key="rtx4090-24gb",
            name="NVIDIA GeForce RTX 4090",
            total_bytes=_mib(24217),
            bandwidth_gbs=1008.0,
            fp16_tflops=165.0,
            fp8_tflops=330.0,
            host_link_gbs=25.0,
            tdp_w=450.0,
            idle_w=30.0,
            compute_capability="8.9",
        ),
        GpuSpec(
            key="l4-24gb",
            name="NVIDIA L4",
            total_bytes=_mib(22563),
            bandwidth_gbs=300.0,
            fp16_tflops=121.0,
            fp8_tflops=242.0,
            host_link_gbs=25.0,
            tdp_w=72.0,
            idle_w=16.0,
            compute_capability="8.9",
        ),
        GpuSpec(
            key="a100-80gb",
            name="NVIDIA A100-SXM4-80GB",
            total_bytes=_mib(81050),
            bandwidth_gbs=2039.0,
            fp16_tflops=312.0,
            fp8_tflops=0.0,
            host_link_gbs=25.0,
            tdp_w=400.0,
            idle_w=60.0,
            compute_capability="8.0",
        ),
        GpuSpec(
            key="h100-80gb",
            name="NVIDIA H100 80GB HBM3",
            total_bytes=_mib(81090),
            bandwidth_gbs=3350.0,
            fp16_tflops=989.0,
            fp8_tflops=1979.0,
            host_link_gbs=50.0,
            tdp_w=700.0,
            idle_w=70.0,
            compute_capability="9.0",
        ),
    )
}

DEFAULT_GPU = "rtx3080-10gb"
"""The GPU simulated when none is named: ``vtc-sim`` alone, ``vtc --demo`` and demo sweeps
(declared once, here). The RTX 3080 10 GB of the write-up vtc was born from (seed 000)."""


class UnknownGpuError(ValueError):
    """``--sim-gpu`` names no catalog entry."""


def resolve_gpu(name: str) -> GpuSpec:
    """The catalog GPU for ``name`` (its key, case-insensitive, or its product name)."""
    wanted = name.strip().lower()
    for gpu in GPUS.values():
        if wanted in (gpu.key, gpu.name.lower()):
            return gpu
    raise UnknownGpuError(f"unknown simulated GPU {name!r}; choose from {', '.join(sorted(GPUS))}")


@dataclass(frozen=True)
class ModelEntry:
    """A model the simulator can serve: its shape plus what the shape does not say."""

    shape: ModelShape
    architecture: str = "LlamaForCausalLM"
    tied_embeddings: bool = False
    checkpoint_quantization: str | None = None  # e.g. "awq" for a pre-quantized checkpoint
    adds_bos: bool = True  # the tokenizer prepends a BOS token to completions prompts
    chat_template: str = "llama3"  # how many template tokens a chat turn adds

    @property
    def embedding_params(self) -> float:
        """Parameters in the input embedding and LM head (one matrix when tied)."""
        s = self.shape
        return float(s.vocab_size * s.hidden_size * (1 if self.tied_embeddings else 2))


def _llama_params(
    layers: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    hidden: int,
    inter: int,
    vocab: int,
    tied: bool,
) -> float:
    attn = hidden * head_dim * (2 * heads + 2 * kv_heads)
    mlp = 3 * hidden * inter
    return float(layers * (attn + mlp) + (1 if tied else 2) * vocab * hidden)


def _entry(
    name: str,
    *,
    layers: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    hidden: int,
    inter: int,
    vocab: int,
    max_pos: int,
    tied: bool = False,
    arch: str = "LlamaForCausalLM",
    bos: bool = True,
    template: str = "llama3",
    quant: str | None = None,
    dtype: str = "bfloat16",
    qkv_bias: bool = False,
) -> ModelEntry:
    params = _llama_params(layers, heads, kv_heads, head_dim, hidden, inter, vocab, tied)
    if qkv_bias:
        params += layers * head_dim * (heads + 2 * kv_heads)
    shape = ModelShape(
        name=name,
        num_layers=layers,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        hidden_size=hidden,
        max_position_embeddings=max_pos,
        param_count=params,
        dtype=dtype,
        vocab_size=vocab,
        intermediate_size=inter,
    )
    return ModelEntry(
        shape=shape,
        architecture=arch,
        tied_embeddings=tied,
        checkpoint_quantization=quant,
        adds_bos=bos,
        chat_template=template,
    )


# Shapes from each model's published config.json.
_LLAMA_8B = dict(
    layers=32,
    heads=32,
    kv_heads=8,
    head_dim=128,
    hidden=4096,
    inter=14336,
    vocab=128256,
    max_pos=131072,
)
_LLAMA_3B = dict(
    layers=28,
    heads=24,
    kv_heads=8,
    head_dim=128,
    hidden=3072,
    inter=8192,
    vocab=128256,
    max_pos=131072,
    tied=True,
)
_LLAMA_1B = dict(
    layers=16,
    heads=32,
    kv_heads=8,
    head_dim=64,
    hidden=2048,
    inter=8192,
    vocab=128256,
    max_pos=131072,
    tied=True,
)
_LLAMA_70B = dict(
    layers=80,
    heads=64,
    kv_heads=8,
    head_dim=128,
    hidden=8192,
    inter=28672,
    vocab=128256,
    max_pos=131072,
)
_QWEN_7B = dict(
    layers=28,
    heads=28,
    kv_heads=4,
    head_dim=128,
    hidden=3584,
    inter=18944,
    vocab=152064,
    max_pos=32768,
    arch="Qwen2ForCausalLM",
    bos=False,
    template="chatml",
    qkv_bias=True,
)
_QWEN_05B = dict(
    layers=24,
    heads=14,
    kv_heads=2,
    head_dim=64,
    hidden=896,
    inter=4864,
    vocab=151936,
    max_pos=32768,
    tied=True,
    arch="Qwen2ForCausalLM",
    bos=False,
    template="chatml",
    qkv_bias=True,
)
_MISTRAL_7B = dict(
    layers=32,
    heads=32,
    kv_heads=8,
    head_dim=128,
    hidden=4096,
    inter=14336,
    vocab=32768,
    max_pos=32768,
    arch="MistralForCausalLM",
    template="mistral",
)
_LLAMA2_7B = dict(
    layers=32,
    heads=32,
    kv_heads=32,  # Llama 2 7B has no grouped-query attention: 4x the KV bytes of Llama 3 8B
    head_dim=128,
    hidden=4096,
    inter=11008,
    vocab=32000,
    max_pos=4096,
    template="mistral",  # [INST] ... [/INST]
    dtype="float16",
)

_CANONICAL: dict[str, dict[str, Any]] = {
    "meta-llama/Llama-3.1-8B-Instruct": _LLAMA_8B,
    "meta-llama/Llama-3.1-8B": _LLAMA_8B,
    "meta-llama/Llama-3.2-3B-Instruct": _LLAMA_3B,
    "meta-llama/Llama-3.2-3B": _LLAMA_3B,
    "meta-llama/Llama-3.2-1B-Instruct": _LLAMA_1B,
    "meta-llama/Llama-3.2-1B": _LLAMA_1B,
    "meta-llama/Llama-3.1-70B-Instruct": _LLAMA_70B,
    "meta-llama/Llama-3.1-70B": _LLAMA_70B,
    "Qwen/Qwen2.5-7B-Instruct": _QWEN_7B,
    "Qwen/Qwen2.5-0.5B-Instruct": _QWEN_05B,
    "mistralai/Mistral-7B-Instruct-v0.3": _MISTRAL_7B,
    "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4": {
        **_LLAMA_8B,
        "quant": "awq",
        "dtype": "float16",
    },
    "Qwen/Qwen2.5-7B-Instruct-AWQ": {**_QWEN_7B, "quant": "awq", "dtype": "float16"},
    "hugging-quants/Llama-3.2-3B-Instruct-AWQ-INT4": {
        **_LLAMA_3B,
        "quant": "awq",
        "dtype": "float16",
    },
    "meta-llama/Llama-2-7b-chat-hf": _LLAMA2_7B,
    "TheBloke/Llama-2-7B-Chat-AWQ": {**_LLAMA2_7B, "quant": "awq"},
}

# Other spellings people use for the same checkpoints (Meta's older "Meta-Llama-" names).
_ALIASES: dict[str, str] = {
    "meta-llama/Meta-Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Meta-Llama-3.1-8B": "meta-llama/Llama-3.1-8B",
    "meta-llama/Meta-Llama-3.1-70B-Instruct": "meta-llama/Llama-3.1-70B-Instruct",
    "meta-llama/Meta-Llama-3.1-70B": "meta-llama/Llama-3.1-70B",
}


def catalog_models() -> list[str]:
    """Every model name the catalog serves (canonical names and aliases)."""
    return sorted([*_CANONICAL, *_ALIASES])


def _from_catalog(name: str) -> ModelEntry | None:
    key = name.strip().rstrip("/")
    lowered = {k.lower(): k for k in [*_CANONICAL, *_ALIASES]}
    canonical = lowered.get(key.lower())
    if canonical is None:
        return None
    canonical = _ALIASES.get(canonical, canonical)
    fields = dict(_CANONICAL[canonical])
    return _entry(name, **fields)


class UnknownModelError(ValueError):
    """The model is neither in the catalog nor a directory with a ``config.json``."""


def invalid_model_message(model: str) -> str:
    """vLLM's text for a model it cannot resolve (``transformers_utils/config.py``)."""
    return (
        f"Invalid repository ID or local directory specified: '{model}'.\n"
        "Please verify the following requirements:\n"
        "1. Provide a valid Hugging Face repository ID.\n"
        "2. Specify a local directory that contains a recognized configuration file.\n"
        "   - For Hugging Face models: ensure the presence of a 'config.json'.\n"
        "   - For Mistral models: ensure the presence of a 'params.json'.\n"
    )


def _entry_from_config(model: str, config_file: Path) -> ModelEntry:
    """A model described by its ``config.json`` (Llama-style keys)."""
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
        if not isinstance(config, dict):
            raise ValueError("not a JSON object")
        shape = ModelShape.from_hf_config(model, config)
        cfg = config.get("text_config", config)
        tied = bool(cfg.get("tie_word_embeddings", False))
        archs = config.get("architectures") or ["LlamaForCausalLM"]
        quant_cfg = config.get("quantization_config") or {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ZeroDivisionError) as exc:
        raise UnknownModelError(f"{config_file}: {exc}") from exc
    if tied:  # from_hf_config counts both embedding matrices
        shape = replace(shape, param_count=shape.param_count - shape.vocab_size * shape.hidden_size)
    quant = quant_cfg.get("quant_method") if isinstance(quant_cfg, dict) else None
    arch = str(archs[0]) if isinstance(archs, list) and archs else "LlamaForCausalLM"
    return ModelEntry(
        shape=shape,
        architecture=arch,
        tied_embeddings=tied,
        checkpoint_quantization=str(quant) if quant else None,
        adds_bos=not arch.startswith("Qwen"),
        chat_template="chatml" if arch.startswith("Qwen") else "llama3",
    )


def resolve_model(model: str, folder: Path | None = None) -> ModelEntry:
    """The shape read from the model's ``config.json``, or the catalog entry for ``model``.

    ``folder`` is where the model's files are (a local directory or its Hugging Face cache
    snapshot, :func:`tui.sim.model_files.model_folder`); by default ``model`` itself as a
    path. Raises :class:`UnknownModelError` carrying vLLM's message for anything else.
    """
    path = folder if folder is not None else as_path(model)
    config_file = path / "config.json"
    try:
        has_config = config_file.is_file()
    except (OSError, ValueError):  # e.g. a NUL byte in the name: no such directory
        has_config = False
    if has_config:
        return _entry_from_config(model, config_file)
    found = _from_catalog(model)
    if found is None:
        raise UnknownModelError(invalid_model_message(model))
    return found
