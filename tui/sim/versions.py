"""The vLLM versions the simulator can speak (``--sim-vllm-version``), and what differs.

Each version's parser is the domain's shipped table of that version
(:mod:`tui.domain.flags.vllm_tables`); the rest that differs is here, read off that version's
source (the 0.33.0 wheel): where its log records come from (0.33 moved the KV planning to
``v1/core/kv_cache_planning.py``), and the ``vllm:`` families its ``/metrics`` page gains.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from tui.domain.flags.vllm_tables import TABLE_MODULES, release, series

SIM_VLLM_VERSIONS: Final = ("0.32.0", "0.33.0")
"""Every version ``--sim-vllm-version`` accepts, oldest first (one per shipped table)."""
DEFAULT_SIM_VLLM_VERSION: Final = SIM_VLLM_VERSIONS[-1]
"""The newest: what a fresh GPU box runs."""


@dataclass(frozen=True)
class KvSources:
    """Where a version logs its KV-cache planning: ``file.py:line`` of each record/frame."""

    auto_fit_kept: str
    auto_fit_reduced: str
    capacity: str
    check_call: tuple[str, int]  # (file, line) in get_kv_cache_configs of the check's call
    check_raise: tuple[str, int]  # (file, line) of the check's raise


_KV_032: Final = KvSources(
    auto_fit_kept="kv_cache_utils.py:2466",
    auto_fit_reduced="kv_cache_utils.py:2476",
    capacity="kv_cache_utils.py:2327",
    check_call=("kv_cache_utils.py", 2642),
    check_raise=("kv_cache_utils.py", 1030),
)
# 0.33.0: v1/core/kv_cache_planning.py:1395,1404 (auto-fit), :1554 (get_kv_cache_configs
# calls the check), :77 (its raise); the capacity line stayed in kv_cache_utils.py (:1148).
_KV_033: Final = KvSources(
    auto_fit_kept="kv_cache_planning.py:1395",
    auto_fit_reduced="kv_cache_planning.py:1404",
    capacity="kv_cache_utils.py:1148",
    check_call=("kv_cache_planning.py", 1554),
    check_raise=("kv_cache_planning.py", 77),
)


SIM_HOSTS: Final = ("linux", "wsl2")
"""``--sim-host``: the simulated machine's OS. Under WSL2 CUDA offers no unified virtual
addressing for pinned host memory, so model runner V2 stops with ``RuntimeError: UVA is not
available`` (``v1/worker/gpu/buffer_utils.py:32`` in 0.32, ``:35`` in 0.33) until
``VLLM_USE_V2_MODEL_RUNNER=0``."""

RUNNER_V2_ENV: Final = "VLLM_USE_V2_MODEL_RUNNER"


def uses_model_runner_v2(version: str, environ: Mapping[str, str]) -> bool:
    """Whether a server of ``version`` with ``environ`` runs model runner V2.

    The variable decides when set (``envs.py``: ``bool(int(value))``, so ``"x"`` raises
    ``ValueError`` as vLLM does). Unset, both 0.32 and 0.33 choose V2 on a GPU with Triton
    and no feature V2 lacks (``VllmConfig.use_v2_model_runner``: 0.32 ``config/vllm.py:
    720-739``, 0.33 ``:748-767``): the simulated GPU box has Triton and the simulator
    models none of those features. ``version`` is kept for the day a release changes it.
    """
    del version  # the same rule in every version simulated
    value = environ.get(RUNNER_V2_ENV)
    if value is not None:
        return bool(int(value))
    return True


def check_sim_version(text: str) -> str:
    """``text`` as a supported version, else ``ValueError`` in argparse's words."""
    if text in SIM_VLLM_VERSIONS:
        return text
    matches = [v for v in SIM_VLLM_VERSIONS if series(v) == text]
    if matches:
        return matches[-1]  # "0.33" means 0.33.0
    choices = ", ".join(repr(v) for v in SIM_VLLM_VERSIONS)
    raise ValueError(f"invalid choice: {text!r} (choose from {choices})")


def kv_sources(version: str) -> KvSources:
    """The KV planning's log sources of ``version``."""
    return _KV_033 if release(version) >= (0, 33) else _KV_032


def has_per_request_metrics(version: str) -> bool:
    """Whether ``--enable-per-request-metrics`` puts ``metrics`` on the streamed usage chunk.

    0.33 (``entrypoints/openai/completion/serving.py:515-547``, chat likewise): the final
    usage chunk of a single-prompt, ``n=1`` stream carries ``PerRequestMetrics``
    (``entrypoints/generate/base/serving.py:55-95``); 0.32 accepts the flag but its chat and
    completion streams carry none.
    """
    return release(version) >= (0, 33)


assert {series(v) for v in SIM_VLLM_VERSIONS} <= set(TABLE_MODULES)
