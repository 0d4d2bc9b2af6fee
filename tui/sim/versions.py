"""The vLLM versions the simulator can speak (``--sim-vllm-version``), read off the records.

Each version is a :class:`~tui.domain.vllm_release.VllmRelease`: its parser (the shipped
table), where its log records come from, the families its ``/metrics`` page gains, what its
streams carry and its model-runner rule. This module answers the simulator's questions from
the record of the version it speaks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from tui.domain.vllm_release import (
    RUNNER_V2_ENV,
    release_of,
    series,
    supported_versions,
)

__all__ = [
    "DEFAULT_SIM_VLLM_VERSION",
    "RUNNER_V2_ENV",
    "SIM_HOSTS",
    "SIM_VLLM_VERSIONS",
    "check_sim_version",
    "has_per_request_metrics",
    "uses_model_runner_v2",
]

SIM_VLLM_VERSIONS: Final = supported_versions()
"""Every version ``--sim-vllm-version`` accepts, oldest first (one per release record)."""
DEFAULT_SIM_VLLM_VERSION: Final = SIM_VLLM_VERSIONS[-1]
"""The newest: what a fresh GPU box runs."""


SIM_HOSTS: Final = ("linux", "wsl2")
"""``--sim-host``: the simulated machine's OS. Under WSL2 CUDA offers no unified virtual
addressing for pinned host memory, so model runner V2 stops with ``RuntimeError: UVA is not
available`` (``v1/worker/gpu/buffer_utils.py:32`` in 0.32, ``:35`` in 0.33) until
``VLLM_USE_V2_MODEL_RUNNER=0``."""


def uses_model_runner_v2(version: str, environ: Mapping[str, str]) -> bool:
    """Whether a server of ``version`` with ``environ`` runs model runner V2.

    The variable decides when set (``envs.py``: ``bool(int(value))``, so ``"x"`` raises
    ``ValueError`` as vLLM does). Unset, the record's default: both 0.32 and 0.33 choose V2
    on a GPU with Triton and no feature V2 lacks, and the simulated GPU box has Triton and
    the simulator models none of those features.
    """
    return release_of(version).uses_runner_v2(environ)


def check_sim_version(text: str) -> str:
    """``text`` as a supported version, else ``ValueError`` in argparse's words."""
    versions = supported_versions()
    if text in versions:
        return text
    matches = [v for v in versions if series(v) == text]
    if matches:
        return matches[-1]  # "0.33" means 0.33.0
    choices = ", ".join(repr(v) for v in versions)
    raise ValueError(f"invalid choice: {text!r} (choose from {choices})")


def has_per_request_metrics(version: str) -> bool:
    """Whether ``--enable-per-request-metrics`` puts ``metrics`` on the streamed usage chunk
    (0.33: ``PerRequestMetrics``, ``entrypoints/generate/base/serving.py:55-95``; 0.32
    accepts the flag but its streams carry none)."""
    return release_of(version).per_request_metrics
