"""Run records for board, export and report tests: one factory, no stored history needed."""

from __future__ import annotations

from typing import Any

from tui.domain.diagnosis import Diagnosis
from tui.domain.flags import ServeFlags
from tui.domain.results import (
    BenchResult,
    Reproduction,
    RunRecord,
    RunStatus,
    StartupProfile,
)
from tui.domain.workload import LoadSpec

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def served_run(
    run_id: int,
    *,
    tput: float = 800.0,
    ttft_p99: float = 120.0,
    e2el_p99: float | None = None,
    workload: LoadSpec | None = None,
    session: str | None = "s1",
    repro: Reproduction | None = None,
    goodput: float | None = None,
    model: str = MODEL,
    **flags: Any,
) -> RunRecord:
    """A run that served and was measured (bench-serve keys, as the load generator writes)."""
    stats = {
        "mean_ttft_ms": ttft_p99 * 0.5,
        "median_ttft_ms": ttft_p99 * 0.4,
        "p99_ttft_ms": ttft_p99,
        "mean_tpot_ms": 20.0,
        "mean_itl_ms": 19.0,
        "p99_itl_ms": 40.0,
        "mean_e2el_ms": (e2el_p99 or ttft_p99 * 10) * 0.6,
        "p99_e2el_ms": e2el_p99 if e2el_p99 is not None else ttft_p99 * 10,
    }
    return RunRecord(
        id=run_id,
        label=f"#{run_id}",
        flags=ServeFlags(model=model, **flags),
        status=RunStatus.STOPPED,
        startup=StartupProfile(seconds_to_ready=12.0, kv_cache_tokens=50_000),
        bench=BenchResult(
            completed=64,
            output_throughput=tput,
            request_throughput=tput / 128,
            request_goodput=goodput,
            stats=stats,
        ),
        workload=workload or LoadSpec(),
        session=session,
        repro=repro,
    )


def failed_run(
    run_id: int,
    *,
    kind: str = "kv_cache_too_small",
    summary: str = "max seq len (30576) is larger than the KV cache (1136 tokens)",
    session: str | None = "s1",
    model: str = MODEL,
    **flags: Any,
) -> RunRecord:
    """A start that failed, with its diagnosis."""
    return RunRecord(
        id=run_id,
        label=f"#{run_id}",
        flags=ServeFlags(model=model, **flags),
        status=RunStatus.FAILED,
        diagnosis=Diagnosis(kind=kind, summary=summary),  # type: ignore[arg-type]
        session=session,
    )
