"""The sweep's trials, one row each: what it tried, the run on the board, the SLO verdict."""

from __future__ import annotations

from textual.widgets import DataTable

from tui.domain.sweep import SweepStatus, TrialOutcome, TrialState
from tui.ui.format import plain

COLUMNS = ("#", "run", "trial", "objective", "verdict")


def trial_row(trial: TrialOutcome) -> tuple[str, str, str, str, str]:
    """The cells of one trial (pruned ones say why they were never started)."""
    run = f"#{trial.run_id}" if trial.run_id is not None else "-"
    value = f"{trial.objective:.1f}" if trial.objective is not None else "-"
    verdict = trial.verdict_text
    if trial.state is TrialState.MEASURED and trial.slo_met:
        verdict = "met"
    return str(trial.index), run, trial.note, value, verdict


class SweepTrials(DataTable[str]):
    """Every trial of the sweep, newest last; the best is marked."""

    def on_mount(self) -> None:
        """The columns."""
        self.cursor_type = "row"
        self.zebra_stripes = True
        self.add_columns(*COLUMNS)

    def show(self, status: SweepStatus | None) -> None:
        """Replace the rows with ``status``'s trials."""
        self.clear()
        if status is None:
            return
        best = status.best.index if status.best is not None else None
        for trial in status.trials:
            cells = list(trial_row(trial))
            if trial.index == best:
                cells[0] = f"*{cells[0]}"
            # A DataTable reads a str as markup: ``[`` escaped, escape sequences removed.
            shown = [plain(str(cell)) for cell in cells]
            self.add_row(*shown, key=str(trial.index))
        if self.row_count:
            self.move_cursor(row=self.row_count - 1)
