"""A sweep trial's further loads on its server (probes) are numbered as they are kept:
the run book stores each as a run of its own (nothing measured is overwritten) tagged
``load`` 2, 3... of its trial, so every reader can say ``probe 2 of #5``."""

from __future__ import annotations

from fakes.runs import MemoryRunStore

from tui.domain.board.table import probe_text
from tui.domain.events import Ready
from tui.domain.flags.serve import ServeFlags
from tui.domain.record import LoadRecorded
from tui.domain.results import BenchResult, RunRecord, SweepTag, TelemetryPeaks
from tui.domain.workload import LoadSpec
from tui.session.runbook import RunBook


def load(rate: float) -> LoadRecorded:
    result = BenchResult(completed=8, output_throughput=100.0 * rate)
    return LoadRecorded(result, LoadSpec(num_prompts=8, request_rate=rate), TelemetryPeaks())


async def test_a_trials_further_loads_are_numbered_probes_of_its_run() -> None:
    book = RunBook(MemoryRunStore(), [], lambda u: None, session_id="s1")
    tag = SweepTag(sweep_id="s", trial=4, note="bisect")
    server = await book.open(RunRecord(flags=ServeFlags(model="m"), sweep=tag))
    book.apply(Ready(elapsed=2.0))
    assert server.id is not None
    kept = [await book.record_load(server.id, load(rate)) for rate in (8.0, 4.0, 6.0)]
    assert all(k is not None for k in kept)
    first, second, third = (k for k in kept if k is not None)
    assert first.id == server.id and not first.probe and first.sweep == tag
    assert second.probe and third.probe
    assert second.sweep is not None and third.sweep is not None
    assert (second.sweep.trial, second.sweep.load, third.sweep.load) == (4, 2, 3)
    assert probe_text(second) == f"probe 2 of #{server.id}"
    assert probe_text(third) == f"probe 3 of #{server.id}"
    assert [k.bench.output_throughput for k in (first, second, third) if k.bench] == [
        800.0,
        400.0,
        600.0,
    ]


async def test_a_hand_runs_further_loads_are_no_probes() -> None:
    book = RunBook(MemoryRunStore(), [], lambda u: None, session_id="s1")
    server = await book.open(RunRecord(flags=ServeFlags(model="m")))
    book.apply(Ready(elapsed=2.0))
    assert server.id is not None
    await book.record_load(server.id, load(4.0))
    again = await book.record_load(server.id, load(4.0))
    assert again is not None and again.load_of == server.id and not again.probe
    assert probe_text(again) == ""
