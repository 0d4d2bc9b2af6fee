"""fp8 on a GPU without fp8: Ampere and older (RTX 30xx, A100, A10, T4, V100).

Native fp8 (e4m3, Triton's ``fp8e4nv``) arrived with Ada (sm89) and Hopper (sm90). On older
GPUs the kernels vLLM compiles with Triton for fp8 fail on first use, in Triton's words:
``type fp8e4nv not supported in this architecture. The supported fp8 dtypes are
('fp8e4b15', 'fp8e5')`` (``triton/language/semantic.py``, Triton 2.2-3.x; vLLM 0.8.5 issue
17581 with Qwen3-FP8 on an A100-class GPU, 0.8.x 18182 Llama-4 Maverick FP8 on A100, 0.8.1
15336 DeepSeek-R1 MLA weights, 0.11 26431 ``--kv-cache-dtype fp8`` on an RTX 3090), or
torch's ``torch._scaled_mm is only supported on CUDA devices with compute capability >= 9.0
or 8.9``. Which fp8 failed decides the fix: the KV cache's (``kv_cache_dtype=auto`` keeps it
in the model's dtype) or the weights' (``--quantization fp8`` unset; a checkpoint stored in
fp8 needs a non-fp8 checkpoint of the same model: no flag helps, and the diagnosis says so).
vLLM 0.8's V1 FlashAttention backend refuses an fp8 KV cache outright (``FlashAttention V1
with FP8 KV cache not yet supported``, vLLM PR 14221). Other kernels word it "... (is only)
supported on ... compute capability >= 8.9 / 90" (torch's Float8 types, ktransformers'
``f8e4m3nv is only supported on compute capability >= 90``).
"""

from __future__ import annotations

from typing import Any, Final

from tui.domain.diagnosis import Diagnosis, Fix
from tui.server.diagnose.common import make
from tui.server.diagnose.reading import LogView, group_text, loose, tolerant

_NO_FP8: Final = tolerant(
    loose(
        r"(?P<text>type (?P<dtype>fp8e\w+) (?:is )?not supported in this architecture|"
        r"fp8e4nv data type is not supported on CUDA arch < ?89|"
        r"_scaled_mm is only supported on CUDA devices with compute capability >= ?9\.0 or 8\.9|"
        r"(?P<fa>FlashAttention does not support fp8 kv-cache on this device|"
        r"\w+(?: V1)? with FP8 KV cache (?:is )?not (?:yet )?supported)|"
        r"(?:fp8|f8e4m3|float8)\w*[^.\n]{0,60}?(?:is )?(?:only )?supported on[^.\n]{0,60}?"
        r"compute capability[^.\n]{0,12}?(?:8\.9|89|9\.0|90))"
    ),
    "not supported in this architecture",
    "not supported on CUDA arch",
    "_scaled_mm is only supported",
    "does not support fp8 kv-cache",
    "with FP8 KV cache",
    "compute capability",
)
# Frames of an fp8 *weight* kernel (block-quantized linear layers, MoE, MLA's dequantization)
# and of the KV cache's attention kernels.
_WEIGHT_FRAMES: Final = tolerant(
    r"fp8_utils|w8a8|per_token_group_quant|quantization[/\\]fp8|scaled_mm|fused[_ ]moe|dequant|"
    r"Marlin|CUTLASS|cutlass_scaled",
    "fp8_utils",
    "w8a8",
    "per_token_group_quant",
    "fp8",
    "scaled_mm",
    "fused",
    "dequant",
    "marlin",
    "cutlass",
)
_GPU_NAME: Final = tolerant(
    r"(?P<name>(?:NVIDIA )?(?:GeForce )?(?:RTX ?(?:A?\d{4}|3\d{3})\w*|A100|A800|A10G?|A30|A40|"
    r"A6000|L4|T4|V100|P100)\b(?:[- ](?:SXM4|PCIe|80GB|40GB|24GB|Ti))*)",
    "RTX",
    "A100",
    "A800",
    "A10",
    "A30",
    "A40",
    "A6000",
    "T4",
    "V100",
    "P100",
)


# The KV cache's own kernels: writing the cache (reshape_and_cache*), the attention backends,
# the Triton prefill/decode kernels that read it (chunked prefill on Ampere, vLLM issue 7714).
# Not the config dump's "kv_cache_dtype=auto": the run's value is read from its arguments.
_KV_FRAMES: Final = tolerant(
    r"reshape_and_cache|fp8 kv-cache|attention[/\\]backends|prefix_prefill|stride_k_cache|"
    r"unified_attention|paged_attention|FP8 KV cache",
    "reshape_and_cache",
    "kv-cache",
    "backends",
    "prefix_prefill",
    "stride_k_cache",
    "unified_attention",
    "paged_attention",
    "kvcache",
)
# An fp8 checkpoint named in the log: "Llama4 Maverick FP8", "--model /models/X-FP8" (upper
# case: Triton's own message says "fp8 dtypes"; not "FP8 KV cache", not a dtype's "FP8E4M3"),
# and the families published in fp8 only (DeepSeek-V3/R1 and their 671B size, vLLM issue
# 15336; Kimi-K2).
_FP8_CHECKPOINT: Final = tolerant(
    r"[-_ /]FP8(?![-_ ]?[Ee]\d|\s*KV)|\bDeepSeek[-_ ]?(?:V3|R1)(?![-_ ]?Distill)|\b671B\b|"
    r"\bKimi[-_ ]?K2\b",
    "FP8",
    "DeepSeek",
    "671B",
    "Kimi",
    ignore_case=False,
)


# A pasted command line's "--kv-cache-dtype fp8" / "--kv_cache_dtype=fp8_e5m2".
_KV_ARG: Final = tolerant(r"--kv[-_]cache[-_]dtype[= ]\W?fp8", "cache")


def _kv_fp8(log: LogView) -> bool:
    dtype = log.value("kv_cache_dtype")
    if isinstance(dtype, str):
        return dtype.lower().startswith("fp8")
    return log.find(_KV_ARG) is not None


def _weights_fp8(log: LogView) -> tuple[bool, bool]:
    """(the weights are fp8, because the run asked for ``--quantization fp8``)."""
    quant = log.value("quantization")
    asked = (
        isinstance(quant, str) and quant.lower().startswith("fp8") and log.explicit("quantization")
    )
    name = str(log.value("model") or "")
    named = "fp8" in name.lower() or log.find(_FP8_CHECKPOINT) is not None
    return asked or named or log.find(_WEIGHT_FRAMES) is not None, asked


def _args_known(log: LogView) -> bool:
    return log.flags is not None or bool(log.non_default_args) or bool(log.namespace_args)


def _fp8_in_kv(log: LogView, weights: bool, flash_attention: bool) -> bool:
    """Whether the fp8 that failed is the KV cache's (else the weights').

    The run's own ``kv_cache_dtype`` and the KV kernels' frames say so; weight evidence
    (an fp8 checkpoint, the flag, a weight kernel) says otherwise; with neither, the KV cache
    only when the run's arguments are unknown (a run that shows them without an fp8 KV
    cache did not ask for one).
    """
    if _kv_fp8(log) or flash_attention or log.find(_KV_FRAMES) is not None:
        return True
    return False if weights else not _args_known(log)


def no_fp8_gpu(log: LogView) -> Diagnosis | None:
    """An fp8 kernel on a GPU without native fp8: the KV cache's or the weights' dtype."""
    found = log.find(_NO_FP8)
    if found is None:
        return None
    m, evidence = found
    text = group_text(m)
    gpu_found = log.find(_GPU_NAME)
    gpu = group_text(gpu_found[0], "name") if gpu_found else "this GPU"
    weights, asked = _weights_fp8(log)
    kv = _fp8_in_kv(log, weights, m.group("fa") is not None)
    facts: dict[str, Any] = {"error": text, "gpu": gpu if gpu_found else None}
    fixes: list[Fix] = []
    if kv:
        fixes.append(
            Fix(
                title="Keep the KV cache in the model's dtype (--kv-cache-dtype auto)",
                set={"kv_cache_dtype": "auto"},
            )
        )
    if asked:
        fixes.append(
            Fix(
                title="Unset --quantization fp8 (serve the weights unquantized)",
                set={"quantization": None},
            )
        )
    what = "the KV cache is" if kv else "the weights are"
    facts["fp8_in"] = "kv_cache" if kv else "weights"
    remedy = (
        "--kv-cache-dtype auto keeps the KV cache in the model's dtype"
        if kv
        else "unset --quantization fp8"
        if asked
        else "no flag helps: the checkpoint is stored in fp8; serve a non-fp8 checkpoint of "
        "the model (BF16, or AWQ/GPTQ int4)"
    )
    head = (
        f"FlashAttention keeps no fp8 KV cache on {gpu}"
        if m.group("fa")
        else f"fp8 on a GPU without fp8: {gpu} has no native fp8 (Ada sm89 / Hopper sm90 and "
        "newer do)"
    )
    return make(
        log,
        "unsupported_dtype" if kv else "unsupported_gpu",
        f"{head}, and {what} fp8 ({text}); {remedy}",
        evidence,
        facts,
        fixes,
    )
