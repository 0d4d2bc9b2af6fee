"""The sweep screen (w): compose and start, progress and verdicts, stop, resume, apply best,
Before/After; the main screen refuses r/b/f while a sweep runs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from painted import painted
from textual.widgets import DataTable, Input, Select
from ui_fakes import FIXED_TIME, FakeSession, NoteLog, baseline_flags, bench

from tui.domain.results import RunRecord, RunStatus, SweepTag
from tui.domain.sweep import (
    Measurement,
    SweepSpec,
    SweepState,
    SweepStatus,
    TrialOutcome,
    TrialState,
)
from tui.domain.sweep.cluster import ClusterChoice
from tui.domain.sweep.slo import SloVerdict
from tui.domain.workload import LoadSpec
from tui.ui.app import create_app
from tui.ui.screens.sweep import SweepScreen
from tui.ui.widgets.sweep_before_after import SweepBeforeAfter
from tui.ui.widgets.sweep_status import SweepStatusLine

SIZE = (120, 40)


def trial(index: int, run_id: int, seqs: int, value: float, met: bool = True) -> TrialOutcome:
    flags = baseline_flags().replace(max_num_seqs=seqs)
    verdict = SloVerdict(met=met, violations=() if met else ("p99_itl_ms 300 > 200",), margin=0.5)
    return TrialOutcome(
        index=index,
        key=f"k{index}",
        note=f"max_num_seqs={seqs}",
        params={"max_num_seqs": seqs},
        flags=flags,
        state=TrialState.MEASURED,
        lane="console",
        run_id=run_id,
        started=True,
        measurements=[Measurement(phase="full", load=LoadSpec(), verdict=verdict, objective=value)],
        chosen=0,
    )


def status(state: SweepState, trials: list[TrialOutcome], best: TrialOutcome | None) -> SweepStatus:
    return SweepStatus(
        sweep_id="s-1",
        name="console-search",
        strategy="search",
        objective="output_throughput",
        state=state,
        trials=tuple(trials),
        planned=6,
        elapsed_s=60.0,
        eta_s=120.0,
        best=best,
        baseline_run_id=1,
        slo="p99_itl_ms <= 200",
        message="console: trial 3 starting",
    )


def runs() -> list[RunRecord]:
    """A baseline with numbers, then two sweep trials on the board."""
    base = RunRecord(
        id=1,
        label="#1",
        created_at=FIXED_TIME,
        flags=baseline_flags(),
        status=RunStatus.READY,
        bench=bench(300.0, 2.3, 900, 2400, 25.0, 60),
    )
    out = [base]
    for rid, seqs, tps in ((2, 64, 420.0), (3, 128, 520.0)):
        out.append(
            RunRecord(
                id=rid,
                label=f"#{rid}",
                created_at=FIXED_TIME,
                flags=baseline_flags().replace(max_num_seqs=seqs),
                status=RunStatus.READY,
                bench=bench(tps, tps / 130, 700, 1800, 20.0, 45),
                sweep=SweepTag(sweep_id="s-1", trial=rid - 1),
            )
        )
    return out


async def open_sweep(pilot: Any) -> SweepScreen:
    await pilot.press("w")
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, SweepScreen)
    return screen


async def test_w_composes_from_the_form_and_starts_a_sweep() -> None:
    session = FakeSession(runs=runs())
    app = create_app(session, clock=None, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sweep(pilot)
        screen.query_one("#sweep-pvalues-0", Input).value = "64, 128, 256"
        screen.query_one("#sweep-p99_itl_ms", Input).value = "200"
        screen.query_one("#sweep-trials", DataTable).focus()
        await pilot.press("g")
        await pilot.pause()
        assert session.sweeps is not None
        ((spec, baseline),) = session.sweeps.started
        assert isinstance(spec, SweepSpec) and spec.strategy == "search"
        assert spec.values("max_num_seqs") == (64, 128, 256)
        assert spec.slo.limits == {"p99_itl_ms": 200.0}
        assert spec.base.model == baseline_flags().model
        assert baseline == session.current.id  # type: ignore[union-attr]
        assert session.sweeps.clusters == [None]  # on this console's server by default


async def test_the_composer_starts_a_sweep_on_a_ray_cluster_when_asked() -> None:
    session = FakeSession(runs=runs())
    app = create_app(session, clock=None, autostart=False)
    notes = NoteLog(app)  # also a notification whose toast has gone
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sweep(pilot)
        screen.query_one("#sweep-where", Select).value = "ray"
        screen.query_one("#sweep-ray-gpus", Input).value = "0"
        screen.query_one("#sweep-trials", DataTable).focus()
        await pilot.press("g")
        await pilot.pause()
        assert session.sweeps is not None and not session.sweeps.started  # refused: one line
        screen.query_one("#sweep-ray-gpus", Input).value = "4"
        await pilot.press("g")
        await pilot.pause()
        assert session.sweeps.clusters == [ClusterChoice(address=None, gpus=4)]
        assert "on a local Ray instance (4 GPUs)" in notes.text(), notes.text()


async def test_progress_trials_and_verdicts_show_and_r_is_refused_while_it_runs() -> None:
    session = FakeSession(runs=runs())
    app = create_app(session, clock=None, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sweep(pilot)
        t1, t2 = trial(1, 2, 64, 420.0, met=False), trial(2, 3, 128, 520.0)
        assert session.sweeps is not None
        session.sweeps.publish(status(SweepState.RUNNING, [t1, t2], t2))
        await pilot.pause()
        head = str(screen.query_one(SweepStatusLine).render())
        assert "2/6 trials" in head and "ETA 2m00s" in head
        # a bar, the best with its unit and SLO verdict, each line whole (80 columns)
        assert "━" in head and "best 520.0 tok/s · SLOs met · trial 2 run #3" in head
        assert all(len(line) <= SIZE[0] - 4 for line in head.splitlines())
        table = screen.query_one("#sweep-trials", DataTable)
        assert table.row_count == 2
        assert table.get_row_at(0)[4] == "missed: p99_itl_ms"  # whole; the numbers below
        table.move_cursor(row=0)  # the trial's reason whole, on the cursor
        await pilot.pause()
        detail = str(screen.query_one("#sweep-trial-detail").render())
        assert "trial 1: max_num_seqs=64" in detail and "missed: p99_itl_ms 300 > 200" in detail
        assert table.get_row_at(1)[0] == "*2" and table.get_row_at(1)[4] == "met"
        assert not screen.query_one("#sweep-composer").display  # running: no form
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        assert "restart" not in session.calls
        await pilot.press("b")
        await pilot.pause()
        assert "run_load" not in session.calls


async def test_at_80x24_a_failed_starts_verdict_is_whole_and_its_reason_on_the_cursor() -> None:
    """``failed start: only 9.`` (issue 17): the cell cut the reason mid-value; now the cell
    says what happened in a few words, whole, and the cursor's detail line says all of it."""
    session = FakeSession(runs=runs())
    app = create_app(session, clock=None, autostart=False)
    reason = "only 9.2 GiB free of 10 GiB; max_model_len 30576 needs 12.4 GiB of KV cache"
    failed = trial(3, 4, 256, 0.0).model_copy(
        update={
            "state": TrialState.FAILED_START,
            "measurements": [],
            "chosen": None,
            "diagnosis": reason,
            "diagnosis_kind": "kv_cache_too_small",
        }
    )
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_sweep(pilot)
        assert session.sweeps is not None
        session.sweeps.publish(status(SweepState.RUNNING, [trial(1, 2, 64, 420.0), failed], None))
        await pilot.pause()
        table = screen.query_one("#sweep-trials", DataTable)
        table.focus()
        table.move_cursor(row=1)
        await pilot.pause()
        await pilot.pause()
        rows = painted(table)
        assert rows[2].rstrip().endswith("failed start: kv_cache_too_small"), rows[2]
        detail = " ".join(line.strip() for line in painted(screen.query_one("#sweep-trial-detail")))
        assert reason in detail and "…" not in detail


async def test_x_stops_and_u_resumes_only_the_sweep_this_screen_ran() -> None:
    """Issue 17: u resumed another process's sweep; now only this screen's, by its id."""
    session = FakeSession(runs=runs())
    app = create_app(session, clock=None, autostart=False)
    notes = NoteLog(app)  # also a notification whose toast has gone
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sweep(pilot)
        sweeps = session.sweeps
        assert sweeps is not None
        sweeps.publish(status(SweepState.RUNNING, [trial(1, 2, 64, 420.0)], None))
        await pilot.pause()
        screen.query_one("#sweep-trials", DataTable).focus()
        await pilot.press("x")
        await pilot.pause()
        await pilot.pause()
        assert sweeps.stops == 1 and not sweeps.running
        unfinished = SweepSpec.model_validate(
            {
                "name": "left",
                "base": {"model": "m"},
                "parameters": {"max_num_seqs": [1, 2]},
                "workload": {},
            }
        )
        sweeps.unfinished = [unfinished]  # another sweep's journal: never taken
        await pilot.press("u")
        await pilot.pause()
        await pilot.pause()
        assert sweeps.started == [] and sweeps.resumed == []
        assert "s-1 has no journal" in notes.text(), notes.text()
        mine = unfinished.model_copy(update={"name": "mine"})
        sweeps.unfinished = [unfinished, mine]
        sweeps.status = replace(sweeps.status, sweep_id=mine.sweep_id())  # type: ignore[arg-type]
        await pilot.press("u")
        await pilot.pause()
        await pilot.pause()
        assert sweeps.resumed == [mine.sweep_id()] and sweeps.started[-1][0] is mine


async def test_u_before_any_sweep_ran_here_says_why_not() -> None:
    session = FakeSession(runs=runs())
    app = create_app(session, clock=None, autostart=False)
    notes = NoteLog(app)  # also a notification whose toast has gone
    async with app.run_test(size=SIZE) as pilot:
        await open_sweep(pilot)
        sweeps = session.sweeps
        assert sweeps is not None
        sweeps.unfinished = [
            SweepSpec.model_validate(
                {
                    "name": "other",
                    "base": {"model": "m"},
                    "parameters": {"max_num_seqs": [1, 2]},
                    "workload": {},
                }
            )
        ]
        await pilot.press("u")
        await pilot.pause()
        assert sweeps.started == []
        assert "has run no sweep" in notes.text(), notes.text()


async def test_a_applies_the_best_to_the_form_and_v_shows_before_after() -> None:
    session = FakeSession(runs=runs())
    app = create_app(session, clock=None, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sweep(pilot)
        best = trial(2, 3, 128, 520.0)
        assert session.sweeps is not None
        session.sweeps.publish(status(SweepState.DONE, [trial(1, 2, 64, 420.0), best], best))
        await pilot.pause()
        screen.query_one("#sweep-trials", DataTable).focus()
        await pilot.press("v")
        await pilot.pause()
        view = screen.query_one(SweepBeforeAfter)
        assert view.display
        shown = view.shown
        assert shown is not None
        assert (shown.before.id, shown.after.id) == (1, 3)  # the baseline run, the best's run
        assert [(c.name, c.new) for c in shown.flag_changes] == [("max_num_seqs", 128)]
        tps = {row.metric.key: row.comparison for row in shown.rows}["output_throughput"]
        assert (tps.reference, tps.value) == (300.0, 520.0)
        await pilot.press("a")
        await pilot.pause()
        assert not isinstance(app.screen, SweepScreen)
        flags, problems = app.main_screen.form.validate_flags()
        assert not problems and flags is not None and flags.max_num_seqs == 128


def test_sweep_screen_snapshot_80x24(snap_compare: Any) -> None:
    session = FakeSession(runs=runs())
    assert session.sweeps is not None
    t1, t2 = trial(1, 2, 64, 420.0, met=False), trial(2, 3, 128, 520.0)
    session.sweeps.status = status(SweepState.RUNNING, [t1, t2], t2)

    async def run_before(pilot: Any) -> None:
        await pilot.press("w")
        await pilot.pause()

    assert snap_compare(
        create_app(session, clock=None, autostart=False),
        terminal_size=(80, 24),
        run_before=run_before,
    )


def test_sweep_form_snapshot_120x40(snap_compare: Any) -> None:
    session = FakeSession(runs=runs())

    async def run_before(pilot: Any) -> None:
        await pilot.press("w")
        await pilot.pause()

    assert snap_compare(
        create_app(session, clock=None, autostart=False),
        terminal_size=(120, 40),
        run_before=run_before,
    )
