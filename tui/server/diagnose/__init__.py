"""Why did ``vllm serve`` fail? A pure function from a log to a :class:`Diagnosis`.

Shared by the console (after a failed start) and ``vtc diagnose LOGFILE``, so the same log
always gives the same answer. Every text matched here is quoted from vLLM's source at the
version that printed it (0.4 to 0.32; each module names its files), from the real CPU
captures (``tests/captures/``), or from logs users posted in vLLM's issues; the corpus in
``tests/diagnosis/corpus/`` holds one cited fixture per wording.

How a kind is chosen: detectors run in a fixed order, root causes first, and the first one
that matches decides. A wrapper such as ``RuntimeError: Engine core initialization failed.
See root cause above`` never wins over the EngineCore ``ValueError`` it wraps; engine-death
detectors run late, and the generic fallback last. The log is read as operators paste it
(wrapped, quoted, trimmed: :mod:`~tui.server.diagnose.reading`).

Every :class:`Fix` is computed from the numbers in the log (and the flags, when given):
``fix.set`` maps snake_case ``ServeFlags`` names to new values, ``None`` meaning "unset"
(vLLM's default). :mod:`~tui.server.diagnose.policy` then holds the fixes to the rules every
kind shares (overrides removed first, never the value that just failed, pre-flight checked
through the injected ``check``). Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from tui.domain.diagnosis import Diagnosis, FixChecker
from tui.domain.flags.serve import ServeFlags
from tui.domain.preflight import KvEstimate
from tui.server.diagnose import (
    access,
    args,
    config,
    engine,
    fp8,
    killed,
    kv,
    memory,
    parallel,
    platform,
    quant,
    room,
    runner,
    speculative,
    toolchain,
)
from tui.server.diagnose.common import Detector
from tui.server.diagnose.policy import finish
from tui.server.diagnose.ports import port_in_use, port_in_use_diagnosis
from tui.server.diagnose.reading import LogView

__all__ = ["DETECTORS", "diagnose", "port_in_use_diagnosis", "preflight_checker"]

DETECTORS: Final[tuple[Detector, ...]] = (
    # argparse and config validation fail first, in the API-server process, before any engine.
    speculative.speculative_json_error,  # before invalid_type: argparse's json.loads refusal
    args.unknown_flag,
    args.invalid_choice,
    args.invalid_type,
    args.lora_rank,  # an adapter loaded at start-up (API server or engine) above the limit
    speculative.speculative_config_error,  # before the generic pydantic block reader
    config.max_model_len_exceeds_model,
    config.scheduler_rules,
    config.legacy_range_errors,
    killed.swap_space_too_large,  # 0.4-0.10: swap space x TP above 70 % of host RAM
    quant.unknown_quantization,
    config.tp_not_divisible,
    parallel.world_size_exceeds_gpus,
    # The model and its files (API server, before the engine; 0.32 raises some of them inside
    # a pydantic ModelConfig block, so before the generic one).
    access.model_access,
    access.remote_code,
    access.tokenizer_error,
    access.unsupported_model,
    config.invalid_flag_value,  # generic pydantic blocks, after the specific texts they may carry
    port_in_use,
    # The platform: drivers, devices, what the GPU can run.
    platform.cuda_driver,
    platform.unsupported_gpu,  # before the dtype: bfloat16 on a GPU vLLM cannot use at all
    platform.unsupported_dtype,
    fp8.no_fp8_gpu,  # Triton/torch refusing fp8 on Ampere and older, at the first fp8 kernel
    runner.model_runner_unsupported,  # 0.33's default runner refusing the machine (UVA, Triton)
    # Engine start (EngineCore / worker root causes, before their wrappers).
    memory.insufficient_free_memory,
    memory.weights_oom,
    room.weights_leave_no_room,  # loaded, but nearly the whole GPU: no utilization helps
    memory.out_of_memory,
    kv.kv_cache_too_small,
    kv.no_kv_cache_memory,
    platform.unsupported_block_size,
    platform.nccl_error,
    access.disk_full,
    # nvcc / a C compiler missing at a JIT build: after the memory and KV texts, which a
    # benign toolchain warning in the same log must not hide.
    toolchain.toolchain_missing,
    engine.profiling_or_engine_timeout,
    # A process killed by the host (OOM killer, SIGILL, SIGBUS): no exception names it.
    killed.worker_killed,
    # Run-time engine death (after the engine was up), then a wrapper with nothing above it.
    engine.unsupported_cpu_attention,
    engine.engine_died,
    engine.wrapper_only,
)


def diagnose(
    log_text: str,
    *,
    flags: ServeFlags | None = None,
    exit_code: int | None = None,
    check: FixChecker | None = None,
) -> Diagnosis:
    """Diagnose a failed ``vllm serve`` run from its combined stdout/stderr.

    ``flags`` (what the run was launched with) refines the fixes, e.g. the block size a
    ``max_model_len`` is rounded to; without them the log's ``non-default args`` line is used.
    ``exit_code`` is recorded in the facts and named in the summary of an unknown failure.
    ``check`` is the pre-flight check each fix's flags go through (see :func:`preflight_checker`;
    used only when ``flags`` are given): a fix that fails it is withheld, the others say
    whether they passed. Always returns a Diagnosis: kind ``unknown`` when nothing known
    matches (``failure_found`` False when the log shows no failure at all).
    """
    log = LogView(log_text, flags, exit_code)
    for detect in DETECTORS:
        result = detect(log)
        if result is not None:
            return finish(result, log, check)
    return finish(engine.fallback(log), log, check)


def preflight_checker(estimate: Callable[[ServeFlags], KvEstimate | None]) -> FixChecker:
    """A :data:`FixChecker` from a pre-flight estimator (``KvEstimator`` is one).

    The estimate's warnings are the problems; ``None`` (model or device unknown) means the
    check could not tell. The estimator may do I/O (it reads the device): call
    :func:`diagnose` with it off the UI loop, as the supervisor already does.
    """

    def check(flags: ServeFlags) -> list[str] | None:
        result = estimate(flags)
        return None if result is None else list(result.warnings)

    return check
