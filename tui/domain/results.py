"""Run results: the benchmark result in ``vllm bench serve``'s keys, and the run record."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tui.domain.diagnosis import Diagnosis
from tui.domain.flags import ServeFlags


class BenchResult(BaseModel):
    """One load run's numbers, with ``vllm bench serve``'s JSON key names (ref 4.2).

    Latency statistics live in ``stats`` keyed exactly as bench serve writes them
    (``mean_ttft_ms``, ``median_tpot_ms``, ``p99_itl_ms``, ``std_e2el_ms``...), so either
    tool's files compare key for key.
    """

    model_config = ConfigDict(extra="allow")

    completed: int = 0
    failed: int = 0
    duration: float = 0.0
    total_input_tokens: int = 0
    total_output_tokens: int = 0
    request_throughput: float = 0.0
    output_throughput: float = 0.0
    total_token_throughput: float = 0.0
    request_goodput: float | None = None
    max_concurrency: int | None = None
    request_rate: float | str = "inf"
    errors: list[str] = Field(default_factory=list)
    stats: dict[str, float] = Field(default_factory=dict)

    def metric(self, key: str) -> float | None:
        """A number by bench-serve key, from the top level or ``stats``."""
        if key in self.stats:
            return self.stats[key]
        value = getattr(self, key, None)
        return float(value) if isinstance(value, int | float) else None

    def to_bench_json(self) -> dict[str, Any]:
        """Flat JSON in bench serve's layout (stats merged into the top level)."""
        data = self.model_dump(exclude={"stats"})
        data.update(self.stats)
        return data


class RunStatus(StrEnum):
    """How a run ended (or where it stands)."""

    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    STOPPED = "stopped"


class StageTiming(BaseModel):
    """One startup stage and how long the server spent in it."""

    name: str
    started_at: float  # seconds since launch
    seconds: float | None = None
    detail: str = ""


class StartupProfile(BaseModel):
    """What a start cost and what it produced."""

    stages: list[StageTiming] = Field(default_factory=list)
    seconds_to_ready: float | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    kv_estimate_tokens: int | None = None  # the pre-flight estimate, to show its error


class RunRecord(BaseModel):
    """One run on the board: flags, how the start went, and the load result if any."""

    id: int | None = None
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    label: str = ""
    flags: ServeFlags
    status: RunStatus = RunStatus.STARTING
    executable: str = "vllm"
    startup: StartupProfile = Field(default_factory=StartupProfile)
    diagnosis: Diagnosis | None = None
    bench: BenchResult | None = None
    workload: dict[str, Any] = Field(default_factory=dict)
    telemetry: dict[str, float] = Field(default_factory=dict)
    log_path: str | None = None
    exit_code: int | None = None
