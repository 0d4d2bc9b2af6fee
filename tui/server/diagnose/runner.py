"""vLLM's GPU model runner V2 (its default on a GPU with Triton) refusing this machine.

Texts (both in 0.32 and 0.33):

- ``RuntimeError: UVA is not available`` (``v1/worker/gpu/buffer_utils.py:32`` in 0.32,
  ``:35`` in 0.33): V2 keeps its input buffers in pinned host memory seen from the GPU
  (unified virtual addressing); WSL2 and some containers do not offer it.
- ``ValueError: Model Runner V2 requires Triton.`` (0.32 ``config/vllm.py:3190``, 0.33
  ``v1/worker/gpu_worker.py:208``): V2 was asked for (``VLLM_USE_V2_MODEL_RUNNER=1``) where
  Triton cannot be imported. (Unasked, 0.33 only warns "Model Runner V2 requires Triton;
  using the V1 model runner instead." and carries on: not a failure.)

The fix is the environment, not a flag: ``VLLM_USE_V2_MODEL_RUNNER=0`` selects the V1 model
runner (``envs.py``; ``config/vllm.py:733-760`` in 0.33 reads it). Either failure ends in
the opaque ``Engine core initialization failed. See root cause above. Failed core proc(s):
{}``; the root cause wins because this detector runs before the wrappers.
"""

from __future__ import annotations

from typing import Final

from tui.domain.diagnosis import Diagnosis, Fix
from tui.domain.vllm_release import RUNNER_V2_ENV
from tui.server.diagnose.common import make
from tui.server.diagnose.reading import LogView, group_text, tolerant

RUNNER_ENV: Final = RUNNER_V2_ENV  # declared once, with the releases

_V2_REFUSED: Final = tolerant(
    # Not the traceback's source line (raise RuntimeError("UVA ...")): the exception's own.
    r'(?P<text>(?<!\(")(?:UVA is not available|Model Runner V2 requires Triton\.(?!.{0,3}using)))',
    "UVA is not available",
    "requires Triton",
)


def model_runner_unsupported(log: LogView) -> Diagnosis | None:
    """Model Runner V2 cannot run here (no UVA, no Triton): use the V1 runner."""
    found = log.find(_V2_REFUSED)
    if not found:
        return None
    m, evidence = found
    text = group_text(m)
    uva = text.startswith("UVA")
    why = (
        "this machine offers no unified virtual addressing (UVA) for pinned host memory "
        "(WSL2 and some containers)"
        if uva
        else "Triton cannot be imported here"
    )
    fix = Fix(
        title=f"Use the V1 model runner: set {RUNNER_ENV}=0 in the run's environment",
        env={RUNNER_ENV: "0"},
    )
    return make(
        log,
        "model_runner_unsupported",
        f"vLLM's model runner V2 cannot start: {text} ({why}); "
        f"{RUNNER_ENV}=0 selects the V1 runner",
        evidence,
        {"error": text, "missing": "uva" if uva else "triton", "env": {RUNNER_ENV: "0"}},
        [fix],
    )
