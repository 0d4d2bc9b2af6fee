"""A vLLM release vtc supports, as one record: every fact that differs between versions.

One :class:`VllmRelease` per supported ``major.minor`` (:data:`RELEASES`), read off that
version's source: the module holding its generated ``vllm serve`` table
(``tools/gen_vllm_serve_options.py``), where its log records and tracebacks come from (the
simulator prints them), which ``/metrics`` families it adds, what its streams carry, the
environment variable that selects its model runner and vLLM's rule for its value, and its
published image. Every consumer (the flag tables, the simulator, the diagnosis, the
metrics page, the exports) reads the record; adding a version is adding one record here
plus its generated table. Pure data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

RUNNER_V2_ENV: Final = "VLLM_USE_V2_MODEL_RUNNER"
"""The variable that selects model runner V2 (1) or V1 (0), read as ``bool(int(value))``
(``envs.py`` of 0.32 and 0.33); the way around ``UVA is not available`` is ``=0``."""

IMAGE: Final = "vllm/vllm-openai"
"""vLLM's published image; the tag is ``v<version>`` (``vllm/vllm-openai:v0.32.0``). Its
entrypoint is ``vllm serve``, so a container's arguments start with the model."""


def release(version: str) -> tuple[int, ...]:
    """``"0.33.0+cpu"`` -> ``(0, 33, 0)``; the parts up to the first non-number."""
    parts: list[int] = []
    for part in version.split("+")[0].split("."):
        digits = part[: len(part) - len(part.lstrip("0123456789"))]  # the leading digits
        if not digits:
            break
        parts.append(int(digits))
        if digits != part:
            break  # "0rc1": a pre-release of 0
    return tuple(parts)


def series(version: str) -> str:
    """``"0.33.0+cpu"`` -> ``"0.33"``."""
    return ".".join(str(n) for n in release(version)[:2])


@dataclass(frozen=True)
class KvSources:
    """Where a version logs its KV-cache planning: ``file.py:line`` of each record/frame."""

    auto_fit_kept: str
    auto_fit_reduced: str
    capacity: str
    check_call: tuple[str, int]  # (file, line) in get_kv_cache_configs of the check's call
    check_raise: tuple[str, int]  # (file, line) of the check's raise


@dataclass(frozen=True)
class RunnerUvaLines:
    """Model runner V2's UVA refusal, the traceback's line numbers in the version's wheel:
    core.py (the executor), executor/abstract.py, uniproc_executor.py (init_device),
    gpu_worker.py (init_device builds the runner; _make_model_runner) and buffer_utils.py
    (``UvaBuffer`` raises)."""

    core: int
    abstract: int
    uniproc: int
    worker_init: int
    worker_make: int
    buffer_raise: int


@dataclass(frozen=True)
class VllmRelease:
    """One supported vLLM release (``version``: its newest patch vtc speaks)."""

    version: str
    table_module: str
    """The generated module holding the release's ``vllm serve`` table."""
    kv_sources: KvSources
    runner_uva: RunnerUvaLines
    offload_config_info: bool
    """Whether ``--kv-offloading-size`` also registers ``vllm:kv_offload_config_info``."""
    per_request_metrics: bool
    """Whether ``--enable-per-request-metrics`` puts ``metrics`` on the streamed usage chunk."""
    runner_v2_env: str = RUNNER_V2_ENV
    runner_v2_default: bool = True
    """Model runner V2 unless the variable says otherwise (on a GPU with Triton)."""

    @property
    def series(self) -> str:
        """``major.minor``."""
        return series(self.version)

    @property
    def image(self) -> str:
        """The published image of this release."""
        return f"{IMAGE}:v{self.version}"

    def uses_runner_v2(self, environ: Mapping[str, str]) -> bool:
        """Whether a server of this release with ``environ`` runs model runner V2 (the
        variable decides when set: ``bool(int(value))``, so ``"x"`` raises ``ValueError`` as
        vLLM does)."""
        value = environ.get(self.runner_v2_env)
        return self.runner_v2_default if value is None else bool(int(value))


V0_32: Final = VllmRelease(
    version="0.32.0",
    table_module="tui.domain.flags.vllm_serve_options",
    kv_sources=KvSources(
        auto_fit_kept="kv_cache_utils.py:2466",
        auto_fit_reduced="kv_cache_utils.py:2476",
        capacity="kv_cache_utils.py:2327",
        check_call=("kv_cache_utils.py", 2642),
        check_raise=("kv_cache_utils.py", 1030),
    ),
    runner_uva=RunnerUvaLines(144, 126, 69, 558, 576, 32),
    offload_config_info=False,
    # 0.32 accepts the flag but its chat and completion streams carry none
    per_request_metrics=False,
)
"""0.32.0 (the CPU build's and the parser env's). V2 is chosen unset on a GPU with Triton
(``VllmConfig.use_v2_model_runner``, ``config/vllm.py:720-739``)."""

V0_33: Final = VllmRelease(
    version="0.33.0",
    table_module="tui.domain.flags.vllm_serve_options_0_33",
    # v1/core/kv_cache_planning.py:1395,1404 (auto-fit), :1554 (get_kv_cache_configs calls
    # the check), :77 (its raise); the capacity line stayed in kv_cache_utils.py (:1148).
    kv_sources=KvSources(
        auto_fit_kept="kv_cache_planning.py:1395",
        auto_fit_reduced="kv_cache_planning.py:1404",
        capacity="kv_cache_utils.py:1148",
        check_call=("kv_cache_planning.py", 1554),
        check_raise=("kv_cache_planning.py", 77),
    ),
    runner_uva=RunnerUvaLines(150, 120, 69, 565, 583, 35),
    # CPUOffloadingInfo (v1/kv_offload/cpu/common.py:34-56)
    offload_config_info=True,
    # entrypoints/openai/completion/serving.py:515-547 (chat likewise): the final usage chunk
    # of a single-prompt, n=1 stream carries PerRequestMetrics
    per_request_metrics=True,
)
"""0.33.0 (its wheel). V2 unset: ``config/vllm.py:748-767``, the same rule as 0.32."""

RELEASES: dict[str, VllmRelease] = {r.series: r for r in (V0_32, V0_33)}
"""``major.minor`` -> its record, oldest first: the one list of supported releases."""


def supported_versions() -> tuple[str, ...]:
    """Every supported release's version, oldest first."""
    return tuple(r.version for r in sorted(RELEASES.values(), key=lambda r: release(r.version)))


def release_of(version: str) -> VllmRelease:
    """The record of ``version``'s series; a version between or past the records: the
    newest record not newer than it (the oldest for an older one)."""
    found = RELEASES.get(series(version))
    if found is not None:
        return found
    ordered = sorted(RELEASES.values(), key=lambda r: release(r.version))
    older = [r for r in ordered if release(r.series) < release(series(version))]
    return older[-1] if older else ordered[0]
