"""A diagnosed startup failure: what went wrong, the numbers, and the fixes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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
    "engine_died",
    "unknown",
]


class Fix(BaseModel):
    """One remedy: a title and the flags to set (snake_case names; ``None`` unsets)."""

    model_config = ConfigDict(frozen=True)

    title: str
    set: dict[str, Any] = Field(default_factory=dict)


class Diagnosis(BaseModel):
    """The cause of a failed start, as ``vtc diagnose --json`` prints it.

    ``facts`` holds the numbers read from the log (e.g. ``max_model_len``,
    ``estimated_max_model_len``); ``evidence`` is the log line that decided the kind.
    """

    model_config = ConfigDict(frozen=True)

    kind: DiagnosisKind
    summary: str
    facts: dict[str, Any] = Field(default_factory=dict)
    fixes: list[Fix] = Field(default_factory=list)
    evidence: str = ""

    def to_json_dict(self) -> dict[str, Any]:
        """The ``{"kind", "summary", "facts", "fixes"}`` document (evidence included)."""
        return self.model_dump(mode="json")
