"""The GPU cannot run what was asked: a dtype, a kernel, a block size; or no GPU, driver, NCCL.

Texts and where they come from:

- bfloat16 below compute capability 8.0: ``Bfloat16 is only supported on GPUs with compute
  capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16
  instead ... --dtype=half.`` (0.4-0.9 ``worker/worker.py``/``v1/worker/gpu_worker.py``;
  0.10+ ``platforms/cuda.py`` ``check_if_supports_dtype``, which may say ``does not have a
  compute capability``);
  a quantization's activation dtype: ``torch.bfloat16 is not supported for quantization method
  awq. Supported dtypes: [torch.float16]`` (0.4 ``model_loader.py`` to 0.32 ``config/vllm.py``);
  0.32's Triton backend: ``FP8 KV cache is not supported ... Re-run with --kv-cache-dtype X.``
- a GPU vLLM cannot use: ``The quantization method X is not supported for the current GPU.
  Minimum capability: 75. Current capability: 70.`` (same files); torch's ``no kernel image is
  available for execution on the device`` and ``... with CUDA capability sm_120 is not compatible
  with the current PyTorch installation``; ``GPUs with compute capability below 7.0 are not
  supported``; FlashAttention's ``only supports Ampere GPUs or newer``; 0.32's attention selector
  when every backend refuses the compute capability.
- block sizes: 0.32 ``No common block size for B (BACKEND: [MultipleOf(16)])``
  (``v1/worker/utils.py:555``) and the selector's ``block_size not supported``; 0.4.3-0.11
  FlashAttention's ``Block size must be a multiple of 16.``; ROCm's ``does not support block
  size B``; the 0.4 paged-attention kernels' ``Unsupported block size: B`` (8, 16 or 32).
- drivers and devices: torch's ``The NVIDIA driver on your system is too old``, ``CUDA driver
  version is insufficient for CUDA runtime version``; ``Found no NVIDIA driver``, ``No CUDA
  GPUs are available``, vLLM's ``Failed to infer device type`` (``config/device.py``).
- NCCL: ``NCCL error: unhandled system error`` (vLLM's pynccl and torch's ``NCCL error in:
  ...``), ``ncclSystemError``/``ncclInternalError``, shared memory ``/dev/shm/nccl-`` warnings,
  custom all-reduce's ``peer access is not supported``.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

from tui.domain.diagnosis import Diagnosis, Fix
from tui.server.diagnose.common import (
    BLOCK_MULTIPLE_CPU,
    BLOCK_MULTIPLE_GPU,
    block_size,
    make,
    positive_int,
)
from tui.server.diagnose.reading import LogView, contains, group_text, tolerant

_BF16: Final = tolerant(
    r"Bfloat16 is only supported on GPUs with compute capability of at least 8\.0\. Your "
    r"(?P<gpu>.{1,80}?) GPU (?:has compute capability (?P<cc>\d+\.\d+)|does not have a compute "
    r"capability)",
    "Bfloat16 is only supported",
)
_QUANT_DTYPE: Final = tolerant(
    r"(?:torch\.)?(?P<dtype>\w{1,20}) is not supported for quantization method "
    r"(?P<q>[\w-]{1,40})\. "
    r"Supported dtypes: \[(?P<dtypes>[^\]]{0,200})\]",
    "is not supported for quantization method",
)
_KV_DTYPE: Final = tolerant(
    r"(?P<what>FP8|bfloat16) KV cache is not supported .{0,200}?Re-run with --kv-cache-dtype "
    r"(?P<suggested>[\w]{1,20})",
    "KV cache is not supported",
)
_DTYPE_NAMES: Final = {
    "float16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "float32": "float32",
    "float": "float32",
}


def unsupported_dtype(log: LogView) -> Diagnosis | None:
    """A dtype the GPU (or the quantization method) cannot run; the fix is one it can."""
    found = log.find(_BF16, "Bfloat16 is only supported")
    if found:
        m, evidence = found
        m = log.refine(m)
        cc = m.group("cc")
        facts: dict[str, Any] = {
            "dtype": "bfloat16",
            "gpu": group_text(m, "gpu"),
            "required_compute_capability": "8.0",
        }
        if cc:
            facts["compute_capability"] = cc
        return make(
            log,
            "unsupported_dtype",
            f"the {facts['gpu']} (compute capability {cc or 'unknown'}) cannot run bfloat16, "
            "which needs 8.0; float16 runs on it",
            evidence,
            facts,
            [Fix(title="Use --dtype float16", set={"dtype": "float16"})],
        )
    found = log.find(_QUANT_DTYPE, "is not supported for quantization method")
    if found:
        m, evidence = found
        dtypes = [
            d.strip().removeprefix("torch.") for d in m.group("dtypes").split(",") if d.strip()
        ]
        usable = [_DTYPE_NAMES[d] for d in dtypes if d in _DTYPE_NAMES]
        fixes = [Fix(title=f"Use --dtype {usable[0]}", set={"dtype": usable[0]})] if usable else []
        return make(
            log,
            "unsupported_dtype",
            f"{m.group('dtype')} is not supported by {m.group('q')} "
            f"(supported: {', '.join(dtypes)})",
            evidence,
            {"dtype": m.group("dtype"), "quantization": m.group("q"), "supported_dtypes": dtypes},
            fixes,
        )
    found = log.find(_KV_DTYPE, "KV cache is not supported")
    if found:
        m, evidence = found
        new = m.group("suggested")
        return make(
            log,
            "unsupported_dtype",
            f"a {m.group('what')} KV cache is not supported on this GPU; {new} is",
            evidence,
            {"kv_cache_dtype": m.group("what").lower(), "suggested_kv_cache_dtype": new},
            [Fix(title=f"Use --kv-cache-dtype {new}", set={"kv_cache_dtype": new})],
        )
    return None


_QUANT_CAPABILITY: Final = tolerant(
    r"(?:The quantization method (?P<q>[\w-]{1,40}) is|Quantization scheme is) not supported "
    r"for[\s',]{0,8}the current GPU\. (?:Minimum|Min) capability: (?P<min>\d+)\.[\s',]{0,8}"
    r"Current capability: (?P<cur>\d+)",
    "the current GPU",
)
_GPU_TOO_OLD: Final = tolerant(
    r"(?P<text>GPUs with compute capability below (?P<min>[\d.]+) are not supported|"
    r"no kernel image is available for execution on the device|"
    r"with CUDA capability (?P<sm>sm_\d+) is not compatible with the current PyTorch installation|"
    r"FlashAttention only supports (?:Ampere|Turing|Hopper) GPUs or newer|"
    r"which is of cuda capability (?P<cc>[\d.]+)\. PyTorch no longer supports this GPU)",
    "compute capability below",
    "no kernel image is available",
    "is not compatible with the current PyTorch",
    "FlashAttention only supports",
    "PyTorch no longer supports this GPU",
)
_SELECTOR: Final = tolerant(
    r"No valid attention backend found for \w{1,20} with (?P<config>.{0,600}?)\. Reasons: "
    r"(?P<reasons>\{.{0,3000}?\})",
    "No valid attention backend",
)


def _capability(text: str) -> str:
    return f"{text[:-1]}.{text[-1]}" if text.isdigit() and len(text) >= 2 else text


def unsupported_gpu(log: LogView) -> Diagnosis | None:
    """The GPU is too old (or too new) for vLLM's kernels, or for the quantization method."""
    found = log.find(_QUANT_CAPABILITY, "the current GPU")
    if found:
        m, evidence = found
        q = m.group("q") or str(log.value("quantization") or "the checkpoint's quantization")
        low, cur = _capability(m.group("min")), _capability(m.group("cur"))
        fixes = []
        if log.explicit("quantization"):
            fixes.append(Fix(title=f"Unset --quantization {q}", set={"quantization": None}))
        return make(
            log,
            "unsupported_gpu",
            f"{q} quantization needs compute capability {low}; this GPU has {cur}"
            + ("" if fixes else " (the checkpoint is quantized: use another checkpoint or GPU)"),
            evidence,
            {"quantization": q, "required_compute_capability": low, "compute_capability": cur},
            fixes,
        )
    found = log.find(_GPU_TOO_OLD)
    if found:
        m, evidence = found
        facts: dict[str, Any] = {"error": group_text(m)}
        if m.group("sm"):
            facts["cuda_arch"] = m.group("sm")
        return make(
            log,
            "unsupported_gpu",
            "this GPU is not supported by the installed vLLM/PyTorch build: " + facts["error"],
            evidence,
            facts,
        )
    found = log.find(_SELECTOR, "No valid attention backend")
    if found and contains(found[0].group("reasons"), "compute capability not supported"):
        m, evidence = found
        return make(
            log,
            "unsupported_gpu",
            "no attention backend supports this GPU's compute capability",
            evidence,
            {"reasons": m.group("reasons")},
        )
    return None


_NO_COMMON_BLOCK: Final = tolerant(
    r"No common block size for (?P<bs>\d+)(?: \((?P<detail>[^']{0,2000}?)\)\.)?",
    "No common block size",
)
_FLASH_MULTIPLE: Final = tolerant(
    r"Block size must be a multiple of (?P<m>\d+)", "Block size must be a multiple of"
)
_KERNEL_BLOCK: Final = tolerant(r"Unsupported block size: (?P<bs>\d+)", "Unsupported block size")
_ROCM_BLOCK: Final = tolerant(
    r"does not support block size (?P<bs>\d+)", "does not support block size"
)
_SELECTED_INVALID: Final = tolerant(
    r"Selected backend \S{1,80} is not valid for this configuration",
    "is not valid for this configuration",
)
_PAGED_KERNEL_SIZES: Final = (8, 16, 32)  # csrc/attention/attention_kernels.cu (vLLM 0.4)


def _nearest_block(bs: int, multiple: int) -> int:
    return max(multiple, round(bs / multiple) * multiple)


def _block_diagnosis(
    log: LogView, evidence: str, bs: int, multiple: int, best: int, detail: str = ""
) -> Diagnosis:
    return make(
        log,
        "unsupported_block_size",
        f"block_size {bs} is not supported by the attention backend"
        + (f" ({detail})" if detail else "")
        + f"; nearest valid: {best}",
        evidence,
        {
            "block_size": bs,
            "block_multiple": multiple,
            "suggested_block_size": best,
            "backends": detail,
        },
        [Fix(title=f"Use block_size {best}", set={"block_size": best})],
    )


def _selector_block(log: LogView) -> Diagnosis | None:
    for m, evidence, _ in log.find_all(_SELECTOR, "No valid attention backend"):
        if not contains(m.group("reasons"), "block_size not supported"):
            continue
        logged = re.search(r"block_size=(\d+)", m.group("config"))
        bs = int(logged.group(1)) if logged else block_size(log)[0]
        return _block_diagnosis(log, evidence, bs, BLOCK_MULTIPLE_GPU, _nearest_block(bs, 16))
    found = log.find(_SELECTED_INVALID, "is not valid for this configuration")
    if found and contains(
        log.flat[found[0].end() : found[0].end() + 400], "block_size not supported"
    ):
        bs = block_size(log)[0]
        return _block_diagnosis(log, found[1], bs, BLOCK_MULTIPLE_GPU, _nearest_block(bs, 16))
    return None


def unsupported_block_size(log: LogView) -> Diagnosis | None:
    """No attention kernel for the block size: the nearest size the backends take."""
    found = log.find(_NO_COMMON_BLOCK, "No common block size")
    if found:
        m, evidence = found
        bs = int(m.group("bs"))
        detail = group_text(m, "detail")
        multiples = [int(x) for x in re.findall(r"MultipleOf\((\d+)\)", detail)]
        default_multiple = BLOCK_MULTIPLE_CPU if log.device == "cpu" else BLOCK_MULTIPLE_GPU
        multiple = math.lcm(*multiples) if multiples else default_multiple
        allowed = [int(x) for x in re.findall(r"(?<![\w(])(\d+)(?![\w)])", detail)]
        if allowed and not multiples:
            best = min(allowed, key=lambda v: (abs(v - bs), v))
        else:
            best = _nearest_block(bs, multiple)
        return _block_diagnosis(log, evidence, bs, multiple, best, detail)
    selector = _selector_block(log)
    if selector is not None:
        return selector
    for pattern, needle in (
        (_KERNEL_BLOCK, "Unsupported block size"),
        (_ROCM_BLOCK, "does not support block size"),
    ):
        found = log.find(pattern, needle)
        if found:
            bs = int(found[0].group("bs"))
            best = min(_PAGED_KERNEL_SIZES, key=lambda v: (abs(v - bs), v))
            if pattern is _ROCM_BLOCK:
                best = _nearest_block(bs, BLOCK_MULTIPLE_GPU)
            return _block_diagnosis(log, found[1], bs, BLOCK_MULTIPLE_GPU, best)
    found = log.find(_FLASH_MULTIPLE, "Block size must be a multiple of")
    if found:
        multiple = int(found[0].group("m"))
        bs = block_size(log)[0]
        return _block_diagnosis(log, found[1], bs, multiple, _nearest_block(bs, multiple))
    return None


_DRIVER_OLD: Final = tolerant(
    r"(?P<text>The NVIDIA driver on your system is too old(?: \(found version (?P<found>\d+)\))?|"
    r"CUDA driver version is insufficient for CUDA runtime version|"
    r"forward compatibility was attempted on non supported HW|"
    r"the provided PTX was compiled with an unsupported toolchain|"
    r"(?:system has )?unsupported display driver ?/ ?cuda driver combination|"
    r"(?P<lib>libcudart\.so\.\d+|libcublas\w{0,4}\.so\.\d+|libnvrtc\.so\.\d+): cannot open "
    r"shared object file)",
    "driver on your system is too old",
    "driver version is insufficient",
    "forward compatibility was attempted",
    "unsupported toolchain",
    "cuda driver combination",
    "cannot open shared object file",
)
# The CUDA runtime's numbered errors as torch and the driver API print them ("Error 803:
# system has unsupported display driver / cuda driver combination" from cudaGetDeviceCount,
# "CUDA driver error: ...", "cudaErrorSystemNotReady"): codes beyond 804 and the others of
# that family (CUDA's driver_types.h). Out-of-memory is memory's, not the platform's.
_CUDA_CODE: Final = tolerant(
    r"(?P<text>(?:Error|error|CUDA error|cudaError) ?(?P<code>\d{2,3})[:,] ?"
    r"(?P<what>[a-zA-Z][^\n(]{2,100})|"
    r"CUDA driver error: (?P<what2>(?!out of memory)[a-zA-Z][^\n(]{2,100})|"
    r"cudaError(?P<name>SystemNotReady|SystemDriverMismatch|CompatNotSupportedOnDevice|"
    r"NoDevice|InvalidDevice|DevicesUnavailable|InsufficientDriver|UnsupportedPtxVersion|"
    r"Mps\w+|Unknown))",
    "Error ",
    "error ",
    "CUDA driver error",
    "cudaError",
)
_MISMATCH_CODES: Final = {35: "insufficient driver", 222: "unsupported PTX", 803: "", 804: ""}
_MISMATCH_NAMES: Final = {
    "SystemDriverMismatch",
    "CompatNotSupportedOnDevice",
    "InsufficientDriver",
    "UnsupportedPtxVersion",
}
_NO_GPU_HINTS: Final = {
    100: "no CUDA-capable device is visible (CUDA_VISIBLE_DEVICES, the container's --gpus)",
    101: "a device index beyond the visible GPUs (CUDA_VISIBLE_DEVICES, tensor parallelism)",
    46: "the GPUs are busy or unavailable (compute mode EXCLUSIVE_PROCESS, another process)",
    801: "the operation is not supported on this device or platform",
    802: "the system is not yet initialized: start nvidia-fabricmanager (NVSwitch systems)",
    999: "the driver is in a bad state (often after suspend): reload it or reboot",
}
_NO_GPU: Final = tolerant(
    r"(?P<text>Found no NVIDIA driver on your system|No CUDA GPUs are available|"
    r"Failed to infer device type|libcuda\.so\.1: cannot open shared object file|"
    r"NVML Shared Library Not Found|CUDA driver initialization failed, you might not have a CUDA "
    r"gpu|"
    r"Torch not compiled with CUDA enabled|No platform detected, vLLM is running on "
    r"UnspecifiedPlatform)",
    "Found no NVIDIA driver",
    "No CUDA GPUs are available",
    "Failed to infer device type",
    "libcuda.so.1",
    "NVML Shared Library Not Found",
    "CUDA driver initialization failed",
    "Torch not compiled with CUDA",
    "UnspecifiedPlatform",
)


def _cuda_code(log: LogView) -> Diagnosis | None:
    """A numbered CUDA runtime/driver error the named texts above do not cover."""
    for m, evidence, _ in log.find_all(_CUDA_CODE):
        found = _cuda_error(m)
        if found is not None:
            return _cuda_diagnosis(log, *found, evidence)
    return None


def _cuda_error(m: re.Match[str]) -> tuple[int | None, str, str] | None:
    """``(code, name, text)`` of a CUDA error match of the runtime's family, else ``None``
    (an out-of-memory is another detector's; "Error 12: ..." from elsewhere is not CUDA's)."""
    what = (m.group("what") or m.group("what2") or "").strip().rstrip(".")
    name = m.group("name") or ""
    if "out of memory" in what.lower() or not (m.group("code") or name or what):
        return None
    code = int(m.group("code")) if m.group("code") else None
    known = code is None or code in _MISMATCH_CODES or code in _NO_GPU_HINTS
    if not known and not 800 <= (code or 0) < 1000:
        return None
    return code, name, " ".join((m.group("text") or "").split())


def _cuda_diagnosis(
    log: LogView, code: int | None, name: str, text: str, evidence: str
) -> Diagnosis:
    facts: dict[str, Any] = {"error": text}
    if code is not None:
        facts["cuda_error_code"] = code
    if code in _MISMATCH_CODES or name in _MISMATCH_NAMES:
        return make(
            log,
            "cuda_driver_mismatch",
            "the NVIDIA driver does not match the CUDA user-space libraries "
            f"({text}): install the driver that matches the CUDA build (in a container, "
            "do not ship a libcuda of its own)",
            evidence,
            facts,
        )
    hint = _NO_GPU_HINTS.get(code or 0, "check the driver and the GPUs' state (nvidia-smi)")
    if name.startswith("Mps") or (code is not None and 805 <= code <= 810):
        hint = "the CUDA MPS server refused the client: check nvidia-cuda-mps-control"
    return make(log, "no_gpu_visible", f"CUDA cannot use the GPU ({text}): {hint}", evidence, facts)


def cuda_driver(log: LogView) -> Diagnosis | None:
    """The driver is too old for the CUDA build, or no GPU/driver is visible at all."""
    found = log.find(_DRIVER_OLD)
    if found:
        m, evidence = found
        facts: dict[str, Any] = {"error": group_text(m)}
        if m.group("found"):
            facts["driver_cuda_version"] = int(m.group("found"))
        code = re.search(r"Error (\d{2,3}): ?$", log.flat[max(0, m.start() - 16) : m.start()])
        if code:
            facts["cuda_error_code"] = int(code.group(1))
        return make(
            log,
            "cuda_driver_mismatch",
            "the NVIDIA driver does not match the CUDA build of PyTorch/vLLM: "
            f"{facts['error']}; update the driver or install a build for its CUDA version",
            evidence,
            facts,
        )
    found = log.find(_NO_GPU)
    if found:
        m, evidence = found
        text = group_text(m)
        return make(
            log,
            "no_gpu_visible",
            f"no GPU is visible to vLLM ({text}): check the driver, CUDA_VISIBLE_DEVICES, or the "
            "container's GPU access (--gpus all)",
            evidence,
            {"error": text},
        )
    return _cuda_code(log)


# Every wording of an NCCL failure: vLLM's pynccl ("NCCL error: unhandled cuda error"),
# torch's c10d ("NCCL error in: .../ProcessGroupNCCL.cpp:1970, unhandled system error",
# DistBackendError, the watchdog's WorkNCCL timeout), NCCL's result names
# (ncclSystemError...), cupy's NcclError ("NCCL_ERROR_UNHANDLED_CUDA_ERROR: ..."),
# NCCL's own WARN lines about shared memory, and P2P refusals.
_NCCL: Final = tolerant(
    r"(?P<text>NCCL error(?::| in: [^,]{0,200},) (?P<what>[a-z][^(\n,]{2,80})|"
    r"nccl(?:System|Internal|UnhandledCuda|InvalidUsage|InvalidArgument|Remote)Error|"
    r"NcclError: ?(?:NCCL_ERROR_\w+)?[^\n]{0,80}|NCCL_ERROR_[A-Z_]+[^\n]{0,80}|"
    r"DistBackendError: [^\n]{0,160}?(?:NCCL|nccl)[^\n]{0,80}|"
    r"Watchdog caught collective operation timeout: WorkNCCL[^\n]{0,120}|"
    r"NCCL WARN .{0,120}?shared memory|peer access is not supported between these two devices|"
    r"Failed to initialize (?:the )?NCCL)",
    "NCCL",
    "nccl",
    "peer access is not supported",
)
_SHM: Final = tolerant(
    r"/dev/shm/nccl-|Error while creating shared memory segment|No space left on device \(28\)",
    "/dev/shm/nccl-",
    "shared memory segment",
    "(28)",
)
_P2P: Final = tolerant(
    r"peer access is not supported|P2P|custom_all_reduce|custom allreduce",
    "peer access",
    "P2P",
    "custom_all_reduce",
    "custom allreduce",
)


def nccl_error(log: LogView) -> Diagnosis | None:
    """NCCL could not start between the GPUs (shared memory, P2P, network)."""
    found = log.find(_NCCL)
    if not found:
        return None
    m, evidence = found
    text = group_text(m)
    facts: dict[str, Any] = {"error": text}
    fixes: list[Fix] = []
    hint = "run with NCCL_DEBUG=INFO to see why"
    if log.find(_SHM):
        facts["cause"] = "shared memory"
        hint = "the container's /dev/shm is too small: run it with --ipc=host or --shm-size"
    elif log.find(_P2P) and positive_int(log, "tensor_parallel_size") > 1:
        facts["cause"] = "peer-to-peer access"
        hint = "GPU peer-to-peer access fails: NCCL_P2P_DISABLE=1 or no custom all-reduce"
        extra = tuple(log.flags.extra_args) if log.flags is not None else ()
        if "--disable-custom-all-reduce" not in extra:
            fixes.append(
                Fix(
                    title="Add --disable-custom-all-reduce",
                    set={"extra_args": (*extra, "--disable-custom-all-reduce")},
                )
            )
    return make(
        log,
        "nccl_error",
        f"NCCL failed to start between the GPUs ({text}); {hint}",
        evidence,
        facts,
        fixes,
    )
