"""Weights that loaded but leave the GPU no room: the start fails right after the load.

vLLM logs what the weights took once they are on the GPU: ``Loading model weights took
14.9888 GB`` (0.4-0.6 V0 ``model_runner.py``), ``model weights take 20.64GiB; non_torch_memory
takes ...`` (0.6.4-0.10 ``worker.py``'s profile), ``Model loading took 14.9 GiB and 5.2
seconds`` (V1 ``gpu_model_runner.py``). When that figure is the GPU's whole size less too little
for activations and a first KV block (a 7B model in 16 bits on a 16 GB card, in fp32 on a 24 GB
one), what fails next is an out-of-memory in the profile run or "No available memory for the
cache blocks". No ``gpu_memory_utilization`` can help then, lower or higher: the weights are
what fills the GPU. What can: fewer bytes per weight (a 16-bit dtype for fp32, fp8 on load),
or more GPUs where the box shows them.
"""

from __future__ import annotations

from typing import Any, Final

from tui.domain.diagnosis import Diagnosis, Fix
from tui.server.diagnose.common import make, positive_int
from tui.server.diagnose.fit import OVERHEAD_GIB, bytes_per_param, gpu_total_gib, gpus_on_box
from tui.server.diagnose.fit import model_name as fit_model_name
from tui.server.diagnose.kv import no_kv_found
from tui.server.diagnose.memory import capturing, cuda_oom, quantized
from tui.server.diagnose.reading import LogView, loose, tolerant

_TOOK: Final = tolerant(
    loose(
        r"(?:Loading model weights took|Model loading took|model weights take|"
        r"model weights took) (?P<n>[\d.]+) ?(?P<unit>GiB|GB)"
    ),
    "weights took",
    "loading took",
    "weights take",
)
NO_ROOM_SHARE: Final = 0.9
"""Weights above this share of the GPU (with the overhead) leave no room to serve."""


def weights_failure(log: LogView) -> tuple[Any, str] | None:
    """What failed after the load: an out-of-memory, or no memory left for the KV cache."""
    return cuda_oom(log) or no_kv_found(log)


def weights_took_gib(log: LogView) -> float | None:
    """The largest "weights took X GiB" figure in the log (vLLM's "GB" is GiB)."""
    figures = [float(m.group("n")) for m, _, _ in log.find_all(_TOOK)]
    return max(figures) if figures else None


def _fixes(log: LogView, took: float, total: float) -> list[Fix]:
    per = bytes_per_param(log, fit_model_name(log))
    fixes: list[Fix] = []

    def fits(share: float) -> bool:
        return took * share + OVERHEAD_GIB <= total * NO_ROOM_SHARE

    if per >= 4 and fits(0.5):
        fixes.append(
            Fix(
                title=f"Load the weights in float16 (half of the {took:g} GiB of float32)",
                set={"dtype": "float16"},
            )
        )
    no_quant = log.value("quantization") is None and not quantized(log)
    if per >= 2 and no_quant and fits(1 / per):
        fixes.append(Fix(title="Quantize the weights to fp8 on load", set={"quantization": "fp8"}))
    tp = positive_int(log, "tensor_parallel_size")
    box = gpus_on_box(log)
    need = next((n for n in (2, 4, 8) if n > tp and fits(tp / n)), None)
    if need is not None and box is not None and box >= need:
        fixes.append(
            Fix(
                title=f"Split the weights over {need} GPUs (this box has {box})",
                set={"tensor_parallel_size": need},
            )
        )
    return fixes


def weights_leave_no_room(log: LogView) -> Diagnosis | None:
    """The weights loaded, but took nearly the whole GPU: what failed after them cannot be
    helped by any utilization."""
    failure = weights_failure(log)
    if failure is None or capturing(log):
        return None
    took, total = weights_took_gib(log), gpu_total_gib(log)
    if took is None or total is None or took + OVERHEAD_GIB <= total * NO_ROOM_SHARE:
        return None
    facts = {
        "weights_gib": took,
        "gpu_gib": round(total, 2),
        "tensor_parallel_size": positive_int(log, "tensor_parallel_size"),
    }
    box = gpus_on_box(log)
    if box is not None:
        facts["gpus_on_box"] = box
    fixes = _fixes(log, took, total)
    remedy = "fewer bytes per weight or more GPUs" if fixes else "a smaller model or a larger GPU"
    return make(
        log,
        "weights_oom",
        f"the weights took {took:g} GiB of the GPU's {total:.2f} GiB, leaving too little for "
        f"activations and the KV cache; no gpu_memory_utilization can help: {remedy}",
        failure[1],
        facts,
        fixes,
    )
