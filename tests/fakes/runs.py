"""Run records for tests: factories for board/export/report tests, and an in-memory store."""

from __future__ import annotations

import threading
from typing import Any

from tui.domain.diagnosis import Diagnosis
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import (
    BenchResult,
    Reproduction,
    RunRecord,
    RunStatus,
    StartupProfile,
    SweepTag,
)
from tui.domain.workload import LoadSpec

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def served_run(
    run_id: int,
    *,
    tput: float = 800.0,
    ttft_p99: float = 120.0,
    e2el_p99: float | None = None,
    itl_p99: float = 40.0,
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
        "p99_itl_ms": itl_p99,
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


class MemoryRunStore:
    """Keeps records in a dict; ids from a counter that never goes back (like AUTOINCREMENT).

    ``writes`` counts updates, ``threads`` the names of the threads that wrote (the run
    book must write off the event loop), ``fail_updates`` makes ``update`` raise.
    """

    def __init__(self, records: list[RunRecord] | None = None) -> None:
        self.records: dict[int, RunRecord] = {r.id: r for r in records or [] if r.id is not None}
        self._next = max(self.records, default=0) + 1
        self.writes = 0
        self.threads: set[str] = set()
        self.fail_updates = False
        self.closed = False
        self.version = 0

    def add(self, record: RunRecord) -> RunRecord:
        """Store with the next id; label ``#id`` unless it has one."""
        self.threads.add(threading.current_thread().name)
        stored = record.model_copy(
            update={"id": self._next, "label": record.label or f"#{self._next}"}
        )
        self.records[self._next] = stored
        self._next += 1
        return stored

    def update(self, record: RunRecord) -> None:
        """Replace the stored copy."""
        self.threads.add(threading.current_thread().name)
        if self.fail_updates:
            raise OSError("disk full")
        assert record.id is not None
        self.records[record.id] = record
        self.writes += 1

    def list(self, limit: int = 200) -> list[RunRecord]:
        """The newest ``limit`` runs, oldest first."""
        return [self.records[k] for k in sorted(self.records)][-limit:]

    def data_version(self) -> int:
        """Bumped by :meth:`write_from_elsewhere` (another process's commit)."""
        return self.version

    def write_from_elsewhere(self, record: RunRecord) -> RunRecord:
        """Store ``record`` as another process would: the data version changes."""
        stored = self.add(record)
        self.version += 1
        return stored

    def close(self) -> None:
        """Mark closed."""
        self.closed = True


PROBED_TRIAL = SweepTag(sweep_id="seed-003", trial=2)


def trial_and_probes() -> list[RunRecord]:
    """A sweep's trial 2 as run #5 (its first load) and two more loads on its server, #6 and
    #7 (``probe 1``/``probe 2 of #5``): rate bisection's probes, each a run of its own."""
    load = LoadSpec(request_rate=4.0)
    trial = served_run(5, tput=700, workload=load).model_copy(update={"sweep": PROBED_TRIAL})
    probes = [
        served_run(n, tput=700 + n, workload=load).model_copy(
            update={"sweep": PROBED_TRIAL.model_copy(update={"load": n - 4}), "load_of": 5}
        )
        for n in (6, 7)
    ]
    return [trial, *probes]
