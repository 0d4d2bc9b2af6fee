"""The run record as a pure fold: ``apply(record, event)``."""

from __future__ import annotations

from tui.domain.diagnosis import Diagnosis
from tui.domain.events import (
    Exited,
    Failed,
    KvCacheReported,
    Launched,
    LogLine,
    Ready,
    Stage,
    StageReached,
)
from tui.domain.flags.serve import ServeFlags
from tui.domain.record import LoadRecorded, RunEnded, apply
from tui.domain.results import BenchResult, RunRecord, RunStatus, TelemetryPeaks
from tui.domain.workload import LoadSpec

RUN = RunRecord(id=1, label="#1", flags=ServeFlags(model="m"))
FAILURE = Diagnosis(kind="kv_cache_too_small", summary="too small")


def fold(record: RunRecord, *events: object) -> RunRecord:
    for event in events:
        record = apply(record, event)  # type: ignore[arg-type]
    return record


def test_a_start_is_folded_stage_by_stage_into_the_startup_profile() -> None:
    run = fold(
        RUN,
        Launched(pid=7, argv=("vllm", "serve", "m"), log_path="/l.log"),
        StageReached(Stage.LAUNCHING, 0.0),
        StageReached(Stage.LOADING_WEIGHTS, 1.5),
        StageReached(Stage.LOADING_WEIGHTS, 4.0, detail="8.1 GiB in 2.4 s"),  # numbers later
        KvCacheReported("GPU", tokens=2240, max_model_len=400, max_concurrency=5.6),
        StageReached(Stage.KV_CACHE, 6.0),
        Ready(elapsed=9.0, kv_cache_tokens=2240, max_concurrency=5.6),
    )
    assert run.status is RunStatus.READY and run.served
    assert run.log_path == "/l.log" and run.repro is not None and run.repro.argv[0] == "vllm"
    names = [s.name for s in run.startup.stages]
    assert names == ["launching", "loading weights", "KV cache allocated"]  # never a repeat
    assert run.startup.stages[1].detail == "8.1 GiB in 2.4 s"
    assert run.startup.stages[1].seconds == 4.5  # closed when the next stage began
    assert run.startup.seconds_to_ready == 9.0 and run.startup.kv_cache_tokens == 2240


def test_a_log_line_changes_nothing_and_returns_the_same_object() -> None:
    assert apply(RUN, LogLine("INFO hello")) is RUN


def test_a_server_found_running_is_not_timed_here() -> None:
    run = apply(RUN, Ready(elapsed=0.0, timed=False))
    assert run.status is RunStatus.READY and run.startup.seconds_to_ready is None


def test_a_failure_keeps_its_cause_whatever_the_console_says_next() -> None:
    run = fold(RUN, Failed(elapsed=3.0, exit_code=1, diagnosis=FAILURE), Exited(exit_code=1))
    assert run.status is RunStatus.FAILED and run.diagnosis == FAILURE
    assert apply(run, RunEnded(RunStatus.REPLACED)) is run
    assert apply(run, RunEnded(RunStatus.LOST)) is run


def test_an_exit_ends_a_live_run_so_it_never_says_ready_for_a_gone_server() -> None:
    ready = apply(RUN, Ready(elapsed=1.0))
    assert apply(ready, Exited(exit_code=0)).status is RunStatus.STOPPED
    stopped = apply(ready, Exited(exit_code=0, requested=True))
    assert stopped.status is RunStatus.STOPPED
    replaced = apply(stopped, RunEnded(RunStatus.REPLACED, "the next run"))
    assert replaced.status is RunStatus.REPLACED and replaced.ended_because == "the next run"
    lost = apply(ready, RunEnded(RunStatus.LOST, "console gone"))
    assert lost.status is RunStatus.LOST
    assert apply(stopped, RunEnded(RunStatus.LOST)) is stopped  # an ended run stays ended


def test_a_cancelled_load_never_replaces_a_completed_result() -> None:
    full = BenchResult(completed=64, output_throughput=900.0)
    partial = BenchResult(completed=3, cancelled=True)
    peaks = TelemetryPeaks(kv_cache_usage=0.9)
    run = apply(RUN, LoadRecorded(full, LoadSpec(num_prompts=64), peaks))
    assert run.bench == full and run.workload == LoadSpec(num_prompts=64) and run.peaks == peaks
    assert apply(run, LoadRecorded(partial, LoadSpec(num_prompts=8), TelemetryPeaks())) is run
    first = apply(RUN, LoadRecorded(partial, LoadSpec(), TelemetryPeaks()))
    assert first.bench == partial  # with nothing better, the partial numbers are shown
