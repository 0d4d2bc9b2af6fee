"""The capacity view's words: the answer shown, and one line per flag set asked.

Each line is the domain's (:meth:`~tui.domain.capacity.CapacityAnswer.summary`, the
replicas, the label with the twin's profile and error), made inert once here: the label
carries a profile name and a model from outside.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.content import Content
from textual.widgets import Static

from tui.domain.capacity import CapacityAnswer
from tui.domain.capacity_plot import legend
from tui.domain.inert import inert

HINT = (
    "Enter asks the twin for the chosen flags (SLOs as p99_ttft_ms=500,p99_e2el_ms=4000; "
    "a target rate for the replicas); a asks for every flag set."
)


class CapacitySummary(Static):
    """The shown answer in a few lines, then the other flag sets' answers, one line each."""

    def show(
        self,
        shown: CapacityAnswer | None,
        others: Sequence[CapacityAnswer] = (),
        *,
        note: str = "",
    ) -> None:
        """``shown`` (``None``: the hint), the answers for the other flag sets, a note."""
        parts: list[str | tuple[str, str]] = []
        if note:
            parts += [(inert(note), "$warning"), "\n"]
        if shown is None:
            parts.append((HINT, "$text-muted"))
            self.update(Content.assemble(*parts))
            return
        parts += [(f"{inert(shown.flags_name)}: ", "bold"), (shown.summary(), "bold $success")]
        if shown.replicas is not None:
            parts += [" · ", shown.replicas_line()]
        parts += ["\n", (inert(shown.label), "$text-muted")]
        parts += [
            (
                f" · {shown.predictions} predictions in {shown.seconds:.1f} s, "
                f"{shown.workload.num_prompts} requests each",
                "$text-muted",
            ),
            "\n",
            (legend(shown), "$text-muted"),
        ]
        for other in others:
            parts += ["\n", f"{inert(other.flags_name)}: {other.summary()}"]
        self.update(Content.assemble(*parts))
