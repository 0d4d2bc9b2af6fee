"""The report's capacity section: the newest answers of ``vtc capacity`` and the console.

Each answer as the twin gave it (the highest rate meeting the SLOs, its interval, the
replicas, labelled predicted with the profile and its error), what the real loads measured
when ``--confirm`` ran them, and the curve's points as a table (rate and the SLO
statistics). Escaped once here: labels and model names come from outside.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from tui.domain.capacity import CapacityAnswer


def _curve_table(answer: CapacityAnswer) -> str:
    keys = sorted(answer.slos.limits)
    head = "".join(f"<th>{escape(k)}</th>" for k in keys)
    rows = []
    for point in answer.curve:
        met = point.ratio(answer.slos) <= 1.0
        cells = "".join(
            f'<td class="num">{point.stats.get(k, float("nan")):,.0f}</td>' for k in keys
        )
        mark = "" if met else ' class="loss"'
        rows.append(f'<tr{mark}><td class="num">{point.rate:.3g}</td>{cells}</tr>')
    return f"<table><tr><th>rate (req/s)</th>{head}</tr>{''.join(rows)}</table>"


def _one(answer: CapacityAnswer) -> str:
    lines = [
        f"<h3>{escape(answer.flags_name)} · {escape(answer.model)}</h3>",
        f"<p><b>{escape(answer.summary())}</b></p>",
        f'<p class="meta">{escape(answer.label)} · {answer.workload.input_len} in / '
        f"{answer.workload.output_len} out · {escape(answer.sizing())}"
        f" · {escape(answer.created)}</p>",
    ]
    if answer.replicas is not None:
        lines.append(f"<p>{escape(answer.replicas_line())}</p>")
    if answer.real_loads:
        lines.append(f"<p>{escape(answer.verdict())}</p>")
    lines.append(f'<div class="scroll">{_curve_table(answer)}</div>')
    return "".join(lines)


def capacity_html(answers: Sequence[CapacityAnswer]) -> str:
    """The section (``""`` when no answer was kept)."""
    if not answers:
        return ""
    return "<h2>Capacity (the twin's curve; real loads marked measured)</h2>" + "".join(
        _one(a) for a in answers
    )
