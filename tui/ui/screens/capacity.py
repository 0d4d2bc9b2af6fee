"""The capacity view: how much traffic these flags hold at the SLOs, on the twin's curve.

Reached with ``m`` (F12, or the palette's Capacity) from the main screen. For the flag sets
it is given (the form's edit, the running server's flags, the board's baseline) and the
form's workload (open arrivals: Poisson or the form's burstiness), it asks the twin of the
server (``SessionInfo.twin``) for the latency-versus-rate curve, the highest rate meeting
the SLOs, the interval the twin's error implies and the replicas a target rate needs; the
twin runs in the session's worker thread, never on the console's loop. Without a profile
it says so in one line and offers ``k``. Real loads that confirm it: ``vtc capacity URL
--confirm``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Input, Select, Static

from tui.domain.board.baseline import run_label
from tui.domain.capacity import CapacityAnswer
from tui.domain.errors import one_line
from tui.domain.flags.serve import ServeFlags
from tui.domain.inert import inert
from tui.domain.results import RunRecord
from tui.domain.sweep.slo import SloLimits
from tui.domain.workload import LoadSpec
from tui.session.port import SessionPort, TwinControl
from tui.ui.screen_keeper import open_screen
from tui.ui.widgets.capacity_inputs import CapacityInputs
from tui.ui.widgets.capacity_plot import CapacityPlot
from tui.ui.widgets.capacity_summary import CapacitySummary
from tui.ui.widgets.flag_form import FlagForm
from tui.ui.widgets.results_board import ResultsBoard
from tui.ui.widgets.steady_footer import SteadyFooter


@dataclass(frozen=True)
class FlagSet:
    """A named command line the view can ask about (``form``, ``running #3``...)."""

    name: str
    flags: ServeFlags


class CapacityScreen(Screen[None]):
    """The twin's capacity for named flag sets (see the module docstring)."""

    DEFAULT_CSS = """
    CapacityScreen #capacity-title {
        height: 1; padding: 0 1; text-style: bold; text-wrap: nowrap; text-overflow: ellipsis;
    }
    CapacityScreen #capacity-plot { height: 1fr; min-height: 6; }
    CapacityScreen #capacity-summary { height: auto; max-height: 8; padding: 0 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", key_display="Esc"),
        Binding("f2", "ask_all", "Every set"),
    ]

    def __init__(self, twin: TwinControl, sets: Sequence[FlagSet], load: LoadSpec) -> None:
        super().__init__()
        assert sets, "at least one flag set"
        self._twin = twin
        self._sets = {s.name: s for s in sets}
        self._load = load.model_copy(update={"max_concurrency": None})
        self._answers: dict[str, CapacityAnswer] = {}
        self._asked: dict[str, tuple[str, float | None]] = {}

    def compose(self) -> ComposeResult:
        """Title, questions, plot, answer, keys."""
        yield Static("", id="capacity-title")
        yield CapacityInputs(list(self._sets), id="capacity-inputs")
        yield CapacityPlot(id="capacity-plot")
        yield CapacitySummary("", id="capacity-summary")
        yield SteadyFooter()

    def on_mount(self) -> None:
        """Title, then the first set's answer."""
        load = self._load
        shape = "Poisson" if load.burstiness == 1.0 else f"burstiness {load.burstiness:g}"
        self.query_one("#capacity-title", Static).update(
            f"Capacity · {load.input_len} in / {load.output_len} out"
            + (f" / {load.prefix_len} shared" if load.prefix_len else "")
            + f" · {shape} · {load.num_prompts} requests per load"
        )
        self.query_one(CapacitySummary).show(None)
        self.query_one("#capacity-slo", Input).focus()
        self._ask([self.inputs.chosen])

    @property
    def inputs(self) -> CapacityInputs:
        """The SLOs, target rate and flag set."""
        return self.query_one(CapacityInputs)

    @property
    def answers(self) -> dict[str, CapacityAnswer]:
        """The answers so far, by flag set."""
        return dict(self._answers)

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self._ask([self.inputs.chosen])

    @on(Select.Changed, "#capacity-set")
    def _chosen(self) -> None:
        self._ask([self.inputs.chosen])

    def action_ask_all(self) -> None:
        """Ask the twin for every flag set (the chosen one is drawn)."""
        chosen = self.inputs.chosen
        self._ask([chosen, *(name for name in self._sets if name != chosen)])

    def action_close(self) -> None:
        """Back to the main screen."""
        self.dismiss(None)

    def _ask(self, names: list[str]) -> None:
        slos, rate, problem = self.inputs.read()
        if slos is None or problem:
            self._show(note=problem)
            return
        question = (slos.model_dump_json(), rate)
        todo = [n for n in names if self._asked.get(n) != question]
        if not todo:
            self._show()
            return
        self._show(note="asking the twin…")
        self._run(todo, slos, rate)

    @work(group="capacity", exclusive=True, exit_on_error=False, description="capacity")
    async def _run(self, names: list[str], slos: SloLimits, rate: float | None) -> None:
        for name in names:
            try:
                answer = await self._twin.capacity(
                    self._sets[name].flags, self._load, slos, target_rate=rate, name=name
                )
            except Exception as exc:  # a twin that cannot answer never breaks the view
                self._show(note=one_line(exc))
                return
            self._answers[name] = answer
            self._asked[name] = (slos.model_dump_json(), rate)
            self._show()

    def _show(self, note: str = "") -> None:
        chosen = self.inputs.chosen
        shown = self._answers.get(chosen)
        others = [a for n, a in self._answers.items() if n != chosen]
        self.query_one(CapacityPlot).show(shown)
        self.query_one(CapacitySummary).show(shown, others, note=inert(note))


def flag_sets(
    form: ServeFlags | None, running: RunRecord | None, baseline: RunRecord | None
) -> list[FlagSet]:
    """The form's edit, the running server's flags and the baseline's (each once, in that
    order; a set equal to one before it is left out)."""
    found: list[FlagSet] = []
    for name, flags in (
        ("form", form),
        (f"running {run_label(running)}" if running else "", running.flags if running else None),
        (
            f"baseline {run_label(baseline)}" if baseline else "",
            baseline.flags if baseline else None,
        ),
    ):
        if flags is not None and all(f.flags != flags for f in found):
            found.append(FlagSet(name, flags))
    return found


def open_capacity(
    host: Screen[Any], session: SessionPort, form: FlagForm, board: ResultsBoard
) -> None:
    """``m``: the capacity view over ``session``'s twin (a notice when there is none)."""
    twin = session.info.twin
    if twin is None:
        host.notify("This console has no twin (k calibrates the server).", severity="warning")
        return
    load, _ = form.validate_workload()
    flags, _ = form.validate_flags()
    shown = board.board
    baseline = shown.baseline.run if shown is not None and shown.baseline is not None else None
    sets = flag_sets(flags, session.current, baseline)
    if load is None or not sets:
        host.notify(
            "The form's flags or workload are not valid: fix them first.", severity="warning"
        )
        return
    open_screen(host.app, CapacityScreen(twin, sets, load))
