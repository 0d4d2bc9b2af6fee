"""Choosing the twin-first strategy in the sweep composer (w), and its predicted rows."""

from __future__ import annotations

from textual.widgets import DataTable, Input, Select, Static
from ui_fakes import FakeSession, baseline_flags

from tui.domain.sweep import Measurement, SweepSpec, SweepState, SweepStatus, TrialOutcome
from tui.domain.sweep.outcome import TrialState
from tui.domain.workload import LoadSpec
from tui.ui.app import create_app
from tui.ui.screens.sweep import SweepScreen
from tui.ui.widgets.sweep_trials import trial_row

SIZE = (80, 24)


async def test_the_composer_offers_twin_first_and_starts_it() -> None:
    session = FakeSession()
    app = create_app(session, clock=None, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w")
        await pilot.pause()
        screen = pilot.app.screen
        assert isinstance(screen, SweepScreen)
        select = screen.query_one("#sweep-strategy", Select)
        select.focus()
        await pilot.press("enter")  # open the list: search, twin-first, grid, auto_tune.sh
        await pilot.pause()
        await pilot.press("down", "enter")
        await pilot.pause()
        assert select.value == "twin"
        shown = select.query_one("#label", Static).render()
        assert "twin-first" in str(shown)  # what the operator reads in the closed select
        screen.query_one("#sweep-pvalues-0", Input).value = "4, 8"
        screen.query_one("#sweep-trials", DataTable).focus()
        await pilot.press("g")
        await pilot.pause()
        assert session.sweeps is not None
        ((spec, _),) = session.sweeps.started
        assert isinstance(spec, SweepSpec) and spec.strategy == "twin"
        assert spec.name.startswith("console-twin-")


def test_a_predicted_row_says_so_where_a_run_would_be() -> None:
    m = Measurement(phase="full", load=LoadSpec(), objective=812.4)
    predicted = TrialOutcome(
        index=1,
        key="",
        note="max_num_seqs=8",
        params={"max_num_seqs": 8},
        flags=baseline_flags(),
        state=TrialState.MEASURED,
        lane="twin",
        measurements=[m],
        chosen=0,
        predicted_by="predicted (twin cpu r2, ±4%)",
    )
    measured = predicted.model_copy(update={"predicted_by": None, "run_id": 7, "started": True})
    assert trial_row(predicted) == ("1", "twin", "max_num_seqs=8", "812.4", "predicted met")
    assert trial_row(measured) == ("1", "#7", "max_num_seqs=8", "812.4", "met")
    status = SweepStatus(
        sweep_id="s",
        name="n",
        strategy="twin",
        objective="output_throughput",
        state=SweepState.DONE,
        trials=(predicted,),
    )
    assert status.starts == 0 and status.failed_starts == 0
