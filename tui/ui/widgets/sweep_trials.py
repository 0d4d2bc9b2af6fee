"""The sweep's trials, one row each: what it tried, the run on the board, the SLO verdict."""

from __future__ import annotations

from textual.message import Message
from textual.widgets import DataTable

from tui.domain.sweep import SweepStatus, TrialOutcome, TrialState
from tui.ui.format import plain

COLUMNS = ("#", "run", "trial", "objective", "verdict")


def short_verdict(trial: TrialOutcome, *, slos: bool = True) -> str:
    """The verdict in a few words, whole in its cell at 80 columns (``missed: p99_itl_ms``,
    ``failed start: kv_cache_too_small``); the reason with its numbers is the detail's.
    Without SLOs a measured trial is ``measured``: there was nothing to meet."""
    if trial.state is TrialState.MEASURED:
        m = trial.measurement
        if m is None or m.verdict.met:
            return met_word(slos) if m is not None else "no measurement"
        return "missed: " + ", ".join(v.split(" ", 1)[0] for v in m.verdict.violations)
    words = {
        TrialState.FAILED_START: "failed start",
        TrialState.PRUNED: "pruned",
        TrialState.BENCH_FAILED: "no measurement",
        TrialState.UP: "up",
    }
    word = words.get(trial.state, trial.state.value)
    return f"{word}: {trial.diagnosis_kind}" if trial.diagnosis_kind else word


def met_word(slos: bool) -> str:
    """``met`` (the SLOs) or, with none set, ``measured``."""
    return "met" if slos else "measured"


def trial_row(trial: TrialOutcome, *, slos: bool = True) -> tuple[str, str, str, str, str]:
    """The cells of one trial: its verdict short (:func:`short_verdict`), never cut; a
    twin's prediction says ``twin`` where a run would be, and its verdict ``predicted ...``."""
    run = f"#{trial.run_id}" if trial.run_id is not None else "twin" if trial.predicted else "-"
    value = f"{trial.objective:.1f}" if trial.objective is not None else "-"
    verdict = ("predicted " if trial.predicted else "") + short_verdict(trial, slos=slos)
    return str(trial.index), run, trial.note, value, verdict


def trial_detail(trial: TrialOutcome, *, slos: bool = True) -> str:
    """The whole of one trial: what it tried, its run, the number and the full reason."""
    run = f" · run #{trial.run_id}" if trial.run_id is not None else ""
    value = f" · {trial.objective:.1f}" if trial.objective is not None else ""
    met = trial.state is TrialState.MEASURED and trial.slo_met
    verdict = met_word(slos) if met else trial.verdict_text
    return f"trial {trial.index}: {trial.note}{run}{value} · {verdict}"


class SweepTrials(DataTable[str]):
    """Every trial of the sweep, newest last; the best is marked. The highlighted trial is
    announced with its whole reason (:func:`trial_detail`): cells cut, the detail does not."""

    class TrialChosen(Message):
        """The cursor is on a trial: ``text`` is all of it."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._trials: dict[str, TrialOutcome] = {}
        self._slos = True  # the sweep set SLOs (else a measured trial met nothing)

    def on_mount(self) -> None:
        """The columns."""
        self.cursor_type = "row"
        self.zebra_stripes = True
        self.add_columns(*COLUMNS)

    def show(self, status: SweepStatus | None) -> None:
        """Replace the rows with ``status``'s trials."""
        self.clear()
        self._trials = {str(t.index): t for t in status.trials} if status is not None else {}
        if status is None:
            return
        self._slos = bool(status.slo)
        best = status.best.index if status.best is not None else None
        for trial in status.trials:
            cells = list(trial_row(trial, slos=self._slos))
            if trial.index == best:
                cells[0] = f"*{cells[0]}"
            # A DataTable reads a str as markup: ``[`` escaped, escape sequences removed.
            shown = [plain(str(cell)) for cell in cells]
            self.add_row(*shown, key=str(trial.index))
        if self.row_count:
            self.move_cursor(row=self.row_count - 1)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """Announce the trial under the cursor, whole."""
        trial = self._trials.get(str(event.row_key.value))
        if trial is not None:
            self.post_message(self.TrialChosen(trial_detail(trial, slos=self._slos)))
