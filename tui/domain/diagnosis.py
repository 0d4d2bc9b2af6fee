"""A diagnosed startup failure: what went wrong, the numbers, and the fixes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tui.domain.flags.run_env import applied
from tui.domain.inert import clip

if TYPE_CHECKING:
    from tui.domain.flags.serve import ServeFlags

DiagnosisKind = Literal[
    "kv_cache_too_small",
    "no_kv_cache_memory",
    "insufficient_free_memory",
    "weights_oom",
    "out_of_memory",
    "max_model_len_exceeds_model",
    "invalid_flag_value",
    "unknown_flag",
    "invalid_choice",
    "port_in_use",
    "tp_not_divisible",
    "world_size_exceeds_gpus",
    "unsupported_block_size",
    "unknown_quantization",
    "unsupported_dtype",
    "unsupported_gpu",
    "unsupported_model",
    "model_not_found",
    "model_access_denied",
    "trust_remote_code_required",
    "tokenizer_error",
    "cuda_driver_mismatch",
    "no_gpu_visible",
    "nccl_error",
    "model_runner_unsupported",
    "disk_full",
    "toolchain_missing",
    "speculative_config_error",
    "worker_killed",
    "engine_died",
    "unknown",
]
DIAGNOSIS_KINDS: tuple[DiagnosisKind, ...] = get_args(DiagnosisKind)


def diagnosis_kind(text: str | None) -> DiagnosisKind:
    """``text`` as a kind (a stored record's string; one no longer known: ``unknown``)."""
    return next((k for k in DIAGNOSIS_KINDS if k == text), "unknown")


FixCheck = Literal["passed", "not_checked"]
"""How an offered fix was checked: ``passed`` the pre-flight check for the flags it would
produce, or ``not_checked`` (``check_note`` says why). A fix that fails the check is not
offered at all (the diagnosis lists it under ``facts["withheld_fixes"]``)."""

FixChecker = Callable[["ServeFlags"], Sequence[str] | None]
"""The pre-flight check a diagnosis runs its fixes through: the problems the flags a fix
would produce are expected to hit (empty: they should start), or ``None`` when it cannot
tell (model or device unknown). Injected, so that diagnosing stays free of I/O."""


class Fix(BaseModel):
    """One remedy: a title, the flags to set (snake_case names; ``None`` unsets) and the
    environment variables to set (``None`` removes one): the run's environment is part of
    its configuration (``ServeFlags.env``; ``VLLM_USE_V2_MODEL_RUNNER=0`` is vLLM 0.33's
    way around UVA), so :meth:`applied_to` sets both and ``f`` restarts with them.

    ``check`` says whether the flags the fix produces passed the pre-flight check;
    ``check_note`` says what was checked, or why nothing could be. A fix always changes
    something: :attr:`is_empty` ones are never offered.
    """

    model_config = ConfigDict(frozen=True)

    title: str
    set: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, str | None] = Field(default_factory=dict)
    check: FixCheck = "not_checked"
    check_note: str = ""

    @property
    def is_empty(self) -> bool:
        """Neither a flag nor a variable to change: applying it would change nothing."""
        return not self.set and not self.env

    def applied_to(self, flags: ServeFlags) -> ServeFlags:
        """``flags`` with this fix applied: its flags set, its variables set or removed in
        the run's environment (validated: ``FlagError`` when the result is refused)."""
        changes: dict[str, Any] = dict(self.set)
        if self.env:
            changes["env"] = applied(changes.get("env", flags.env), self.env)
        return flags.replace(**changes)

    def describe(self) -> str:
        """The settings as one line: ``name=value`` for flags, ``NAME=value`` for variables."""
        parts = [f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in self.set.items()]
        parts += [f"{k}={v}" if v is not None else f"unset {k}" for k, v in self.env.items()]
        return ", ".join(parts)


EVIDENCE_CHARS = 400
"""The most of the deciding log line a diagnosis quotes."""


class Diagnosis(BaseModel):
    """The cause of a failed start, as ``vtc diagnose --json`` prints it.

    ``facts`` holds the numbers read from the log (e.g. ``max_model_len``,
    ``estimated_max_model_len``); ``evidence`` is the log line that decided the kind.
    ``failure_found`` is ``False`` when the log shows no failure at all (kind ``unknown``,
    nothing to explain); it is not part of the JSON document.
    """

    model_config = ConfigDict(frozen=True)

    kind: DiagnosisKind
    summary: str
    facts: dict[str, Any] = Field(default_factory=dict)
    fixes: list[Fix] = Field(default_factory=list)
    evidence: str = ""
    failure_found: bool = Field(default=True, exclude=True)

    @field_validator("evidence")
    @classmethod
    def _one_screen_line(cls, line: str) -> str:
        # The deciding log line is quoted, not kept: a 1 MiB line is cut to what one
        # terminal line shows, in the text and the JSON alike.
        return clip(line, EVIDENCE_CHARS)

    def to_json_dict(self) -> dict[str, Any]:
        """The ``{"kind", "summary", "facts", "fixes"}`` document (evidence included)."""
        return self.model_dump(mode="json")
