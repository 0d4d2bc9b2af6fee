"""What the load generator is asked to do, and the live progress it reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Endpoint = Literal["completions", "chat"]


class LoadSpec(BaseModel):
    """A load run, in ``vllm bench serve``'s terms (reference section 4)."""

    # "Infinity" in JSON (an infinite request rate), not null: it must read back.
    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings")

    endpoint: Endpoint = "completions"
    input_len: int = Field(default=128, ge=1)
    output_len: int = Field(default=128, ge=1)
    range_ratio: float = Field(default=0.0, ge=0.0, lt=1.0)
    prefix_len: int = Field(default=0, ge=0)
    num_prompts: int = Field(default=64, ge=1)
    max_concurrency: int | None = Field(default=16, ge=1)
    request_rate: float = Field(default=float("inf"), gt=0)
    burstiness: float = Field(default=1.0, gt=0)
    seed: int = 0
    ignore_eos: bool = True  # bench serve forces it for random datasets (ref 4.5)
    request_timeout_s: float = Field(default=600.0, gt=0)


@dataclass(frozen=True)
class LoadProgress:
    """Once a second while a load runs."""

    elapsed: float
    done: int
    failed: int
    in_flight: int
    total: int
    output_tokens_per_s: float
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    loop_lag_ms: float | None = None  # the client's own event-loop lag
