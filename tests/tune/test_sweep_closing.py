"""The closing line of ``vtc sweep``: the state said once, then why it ended, then counts."""

from __future__ import annotations

from fakes.sweep_lanes import ScriptedLane, saturating

from tui.domain.sweep import SweepSpec, SweepState, SweepStatus
from tui.tune.report import closing_line
from tui.tune.run import SweepRun


def _grid(**budget: int) -> SweepSpec:
    data: dict[str, object] = {
        "name": "g",
        "strategy": "grid",
        "objective": "request_throughput",
        "base": {"model": "m"},
        "parameters": {"max_num_seqs": [8, 16]},
        "workload": {"input_len": 16, "output_len": 8, "num_prompts": 4},
    }
    if budget:
        data["budget"] = budget
    return SweepSpec.model_validate(data)


async def test_a_finished_sweep_says_what_finished_not_done_done() -> None:
    status = await SweepRun(_grid(), [ScriptedLane(model=saturating(50.0))]).run()
    line = closing_line(status)
    assert status.state is SweepState.DONE
    assert "done: done" not in line and line.startswith("done: ")
    assert "every trial the strategy planned has run" in line and "(2 trials, 2 starts)" in line


async def test_a_spent_budget_names_the_budget_once() -> None:
    status = await SweepRun(_grid(max_starts=1), [ScriptedLane(model=saturating(50.0))]).run()
    line = closing_line(status)
    assert line.count("done") == 1, line
    assert "budget of 1 starts spent" in line


def test_a_message_that_begins_with_its_state_is_not_prefixed_again() -> None:
    status = SweepStatus(
        sweep_id="s",
        name="s",
        strategy="grid",
        objective="request_throughput",
        state=SweepState.STOPPED,
        message="stopped: the next run of this spec resumes it",
    )
    assert closing_line(status) == (
        "stopped: the next run of this spec resumes it (0 trials, 0 starts)"
    )


def test_a_twins_predictions_are_counted_apart_and_not_printed_as_trials() -> None:
    """A twin-first sweep ranks the space on the twin: hundreds of predictions, which are no
    trials run; `vtc sweep --demo --strategy twin` printed 576 'trial N twin ...' lines and
    closed with '(577 trials, 1 starts)' for one real start."""
    import io

    from tui.app.sweep import Printer
    from tui.domain.sweep import TrialOutcome, TrialState
    from tui.tune.report import progress_line

    predicted = [
        TrialOutcome(index=i, key=f"p{i}", state=TrialState.MEASURED, predicted_by="twin x")
        for i in range(1, 4)
    ]
    real = TrialOutcome(index=4, key="r", state=TrialState.MEASURED, started=True, run_id=7)
    status = SweepStatus(
        sweep_id="s",
        name="s",
        strategy="twin",
        objective="output_throughput",
        state=SweepState.STOPPED,
        message="stopped",
        trials=(*predicted, real),
    )
    assert closing_line(status) == "stopped (1 trials, 1 starts, 3 predicted)"
    assert progress_line(status).startswith("twin 1 trials · 1 starts (0 failed) · 3 predicted")
    out = io.StringIO()
    Printer(out, tty=False).show(status)
    lines = out.getvalue().splitlines()
    assert [line for line in lines if line.startswith("trial ")] == [
        line for line in lines if line.startswith("trial 4 ")
    ]
    assert len([line for line in lines if line.startswith("trial ")]) == 1
