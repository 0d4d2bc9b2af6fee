"""Do the weights fit the GPU at all? Arithmetic from the log's own numbers.

The weights' size is the model's parameter count (from its name: ``Llama-2-70b``,
``Qwen2.5-7B``, ``Mixtral-8x7B``) times the bytes per parameter of the dtype the run used
(``float32`` 4, 16-bit 2, fp8 1, the 4-bit methods about half a byte); the GPU's size is the
one torch's out-of-memory message (``GPU 0 has a total capacity of X GiB``), vLLM's
``total_gpu_memory (X GiB)`` line (0.5-0.7 ``worker.py``) or its free-memory check
(``(free/total GiB)``, 0.9+) names. vLLM loads the whole of a rank's weights onto its GPU
before it sizes anything else, so weights above the GPU cannot be helped by any
``gpu_memory_utilization``: only fewer bytes per parameter (a smaller dtype, quantization) or
more GPUs (tensor parallelism: each holds 1/n) can, and more GPUs only where the box has them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from tui.server.diagnose.common import positive_int
from tui.server.diagnose.reading import LogView, loose, tolerant

# Room a rank needs besides its weights: CUDA context, activations, a first KV block.
OVERHEAD_GIB: Final = 1.5
MOE_SHARE: Final = 0.83  # Mixtral 8x7B is 46.7B, not 56B (8x22B: 141B of 176B)
_PARAMS: Final = re.compile(
    r"(?<![\w.])(?:(?P<experts>\d+)x)?(?P<b>\d+(?:\.\d+)?)\s?[bB](?![a-zA-Z0-9])"
)
_FOUR_BIT: Final = re.compile(r"awq|gptq|int4|4bit|4-bit|w4a16|bnb|nf4|q4_|marlin", re.I)
_EIGHT_BIT: Final = re.compile(r"fp8|int8|8bit|w8a8|w8a16|q8_", re.I)
_TOTAL: Final = (
    tolerant(
        loose(r"GPU \d+ has a total capac\w{0,3} of (?P<total>[\d.]+) (?P<unit>GiB|MiB)"),
        "total capac",
    ),
    tolerant(
        loose(r"\(GPU \d+; (?P<total>[\d.]+) (?P<unit>GiB|MiB) total capacity"), "total capacity"
    ),
    tolerant(
        loose(r"total_gpu_memory \((?P<total>[\d.]+) ?(?P<unit>GiB|GB)\)"), "total_gpu_memory"
    ),
    tolerant(
        loose(r"Free memory on device.{0,20}?\([\d.]+/(?P<total>[\d.]+) (?P<unit>GiB)\)"),
        "Free memory on device",
    ),
)
# Total memory (GiB, as torch reports it) of GPUs whose name fixes it, for a log that names
# the GPU but no figure ("on Colab's T4"); names with several sizes (V100, A100) need theirs.
_GPU_GIB: Final = (
    (re.compile(r"\bT4\b"), 14.75),
    (re.compile(r"\bA10G?\b"), 22.0),
    (re.compile(r"\bL4\b"), 22.0),
    (re.compile(r"RTX ?3080\b(?! ?Ti)"), 10.0),
    (re.compile(r"RTX ?(?:3090|4090)\b"), 23.6),
    (re.compile(r"RTX ?3060\b"), 11.8),
    (re.compile(r"\bH100\b"), 79.1),
    (re.compile(r"\bA100\b.{0,20}80 ?GB|\bA100-SXM4-80GB"), 79.1),
    (re.compile(r"\bA100\b.{0,20}40 ?GB"), 39.4),
)
_DTYPE_ARG: Final = re.compile(r"--dtype[= ]['\"]?(float32|float|float16|bfloat16|half|auto)\b")
_GPU_LINE: Final = re.compile(r"^\s*GPU (\d+): (?:NVIDIA|Tesla|AMD|Quadro)", re.M)
# nvidia-smi's table rows ("|   3  NVIDIA A100-SXM4-80GB  On  |") and its CSV query rows
# ("NVIDIA A100 80GB PCIe, 8.0, 81920 MiB", vLLM issue 54318), one per GPU.
_SMI_ROW: Final = re.compile(
    r"^\|?\s*(\d+)\s+(?:NVIDIA|Tesla|Quadro|GeForce)\b[^|\n]*\|[^|\n]*\|[^|\n]*\|?$|"
    r"^(?:NVIDIA|Tesla|Quadro) [\w -]+, \d\.\d, \d+ MiB$",
    re.M,
)
# vLLM's distributed init: "rank 0 in world size 4 is assigned as DP rank 0, PP rank 0, TP rank 0".
_WORLD: Final = re.compile(r"in world size (\d+) is assigned")
_VISIBLE: Final = re.compile(r"CUDA_VISIBLE_DEVICES[=:]\s*['\"]?(\d+(?:,\d+)*)")
_MODEL: Final = tolerant(
    r"(?:model=|Starting to load model |model_tag=|--model )['\"]?(?P<m>[\w./~-]+)", "model"
)


@dataclass(frozen=True)
class Fit:
    """The weights of one rank against its GPU, in GiB (``None``: the log does not tell)."""

    params_b: float | None
    bytes_per_param: float
    weights_gib: float | None
    gpu_gib: float | None
    tensor_parallel_size: int
    gpus_on_box: int | None

    @property
    def known(self) -> bool:
        """Whether both sides of the arithmetic are known."""
        return self.weights_gib is not None and self.gpu_gib is not None

    def fits(self, bytes_per_param: float | None = None, tp: int | None = None) -> bool:
        """Whether the weights (at ``bytes_per_param``, over ``tp`` GPUs) fit one GPU."""
        if self.params_b is None or self.gpu_gib is None:
            return False
        per = self.bytes_per_param if bytes_per_param is None else bytes_per_param
        share = self.params_b * 1e9 * per / 2**30 / (tp or self.tensor_parallel_size)
        return share + OVERHEAD_GIB <= self.gpu_gib

    def gpus_needed(self) -> int | None:
        """The smallest power-of-two tensor parallel size whose share fits (up to 64)."""
        for tp in (1, 2, 4, 8, 16, 32, 64):
            if self.fits(tp=tp):
                return tp
        return None


def model_name(log: LogView) -> str | None:
    """The model the run served: its flags, its logged arguments, else the log's text."""
    for name in ("model", "model_tag"):
        v = log.value(name)
        if isinstance(v, str) and v:
            return v
    found = log.find(_MODEL)
    return found[0].group("m") if found else None


def params_b(name: str | None) -> float | None:
    """Billions of parameters from a model's name (``70b``, ``8x7B``), when it says."""
    if not name:
        return None
    found = list(_PARAMS.finditer(name.rsplit("/", 1)[-1]))
    if not found:
        return None
    m = found[-1]
    b = float(m.group("b"))
    if m.group("experts"):
        b *= int(m.group("experts")) * MOE_SHARE
    return b if b >= 0.1 else None


def bytes_per_param(log: LogView, name: str | None) -> float:
    """Bytes per parameter: the quantization's, else the dtype's (16-bit when unknown)."""
    quant = log.value("quantization")
    hint = f"{quant or ''} {name or ''}"
    if _FOUR_BIT.search(hint):
        return 0.55
    if _EIGHT_BIT.search(hint):
        return 1.0
    dtype = str(log.value("dtype") or "").replace("torch.", "")
    if not dtype:  # a pasted command line: "--dtype=float", "--dtype float32"
        m = _DTYPE_ARG.search(log.flat)
        dtype = m.group(1) if m else ""
    return 4.0 if dtype in ("float32", "float") else 2.0


def gpu_total_gib(log: LogView) -> float | None:
    """The GPU's total memory in GiB, as the log names it."""
    for pattern in _TOTAL:
        found = log.find(pattern)
        if found:
            m = found[0]
            total = float(m.group("total"))
            return total / 1024 if m.group("unit") == "MiB" else total
    for name, size in _GPU_GIB:
        if name.search(log.flat):
            return size
    return None


def gpus_on_box(log: LogView) -> int | None:
    """How many GPUs the box has, where the log shows it (collect_env's ``GPU n:`` lines,
    ``CUDA_VISIBLE_DEVICES``, nvidia-smi's rows, the world size vLLM's ranks joined);
    ``None`` when it does not."""
    raw = "\n".join(p.raw for p in log.physical)
    listed = {int(n) for n in _GPU_LINE.findall(raw)}
    visible = _VISIBLE.search(log.flat)
    counts = [len(listed)] if listed else []
    if visible:
        counts.append(len(visible.group(1).split(",")))
    smi = _SMI_ROW.findall(raw)
    if smi:
        counts.append(len(smi))
    counts += [int(n) for n in _WORLD.findall(log.flat)]
    return max(counts) if counts else None


def fit(log: LogView) -> Fit:
    """The weights-against-GPU arithmetic this log allows."""
    name = model_name(log)
    params = params_b(name)
    per = bytes_per_param(log, name)
    tp = positive_int(log, "tensor_parallel_size")
    weights = None if params is None else round(params * 1e9 * per / 2**30 / tp, 1)
    gpu = gpu_total_gib(log)
    return Fit(params, per, weights, None if gpu is None else round(gpu, 2), tp, gpus_on_box(log))
