"""A vLLM release's ``--quantization`` methods, as one record per release (pure data).

The release record (:mod:`tui.domain.vllm_release`) names its :class:`Quantization`; the
flag rules (:mod:`tui.domain.flags.serve_rules`) and the model checks
(:mod:`tui.domain.flags.validation`) read the methods from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Quantization:
    """The methods a release's ``--quantization`` accepts, in the order vLLM lists them."""

    methods: tuple[str, ...]
    deprecated: tuple[str, ...]
    """Accepted only with ``--allow-deprecated-quantization``."""
    needs_checkpoint: frozenset[str]
    """Methods that need the checkpoint's own quantization config: on an unquantized model
    vLLM refuses them ("Cannot find the config file for awq", config/vllm.py) or fails to
    build their config (compressed-tensors, quark, torchao, online). Measured on the CPU
    build."""


V0_32_QUANTIZATION: Final = Quantization(
    # model_executor/layers/quantization/__init__.py:15-50 (0.33.0: the same list, :15-50)
    methods=(
        "awq",
        "auto_awq",
        "fp8",
        "fbgemm_fp8",
        "fp_quant",
        "modelopt",
        "modelopt_fp4",
        "modelopt_mxfp8",
        "modelopt_mixed",
        "auto_gptq",
        "gptq",
        "gptq_marlin",
        "awq_marlin",
        "humming",
        "compressed-tensors",
        "experts_int8",
        "quark",
        "moe_wna16",
        "torchao",
        "inc",
        "mxfp4",
        "gpt_oss_mxfp4",
        "deepseek_v4_fp8",
        "online",
        "fp8_per_tensor",
        "fp8_per_block",
        "fp8_per_channel",
        "int8_per_channel_weight_only",
        "nvfp4_per_token",
        "mxfp8",
    ),
    # quantization/__init__.py:52-55; config/model.py:1459-1472
    deprecated=("fbgemm_fp8", "fp_quant"),
    needs_checkpoint=frozenset(
        {
            "awq",
            "auto_awq",
            "modelopt",
            "modelopt_fp4",
            "modelopt_mxfp8",
            "modelopt_mixed",
            "auto_gptq",
            "gptq",
            "gptq_marlin",
            "awq_marlin",
            "moe_wna16",
            "inc",
            "compressed-tensors",
            "quark",
            "torchao",
            "online",
        }
    ),
)
"""vLLM 0.32.0's (and 0.33.0's: its list is the same)."""
