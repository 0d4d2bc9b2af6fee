"""``vtc report``: the board as one self-contained HTML page.

One file, nothing fetched: the CSS is inline, the plots are inline SVG drawn by
:mod:`tui.store.report_plot`, there is no script, and a Content-Security-Policy of
``default-src 'none'`` makes the browser refuse any request the page might still try. It
holds the table (the same :class:`~tui.domain.board.table.BoardTable` as ``vtc runs``), the
throughput-vs-latency plots with the Pareto frontier, the baseline against the selected run
in seed 003's Before / After shape, and each run's reproduction command.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from html import escape
from pathlib import Path

from tui.domain.board.before_after import BeforeAfter
from tui.domain.board.metrics import LATENCY_AXES
from tui.domain.board.noise import Verdict
from tui.domain.board.pareto import build_scatter
from tui.domain.board.render import LEGEND, cell_text, machine_line
from tui.domain.board.table import Cell, Column, Row
from tui.domain.board.view import Board
from tui.domain.capacity import CapacityAnswer
from tui.domain.export import export_run
from tui.domain.export.launch import ExportOptions
from tui.domain.flags.serve import format_value
from tui.store.atomic import write_atomic
from tui.store.report_capacity import capacity_html
from tui.store.report_plot import scatter_svg

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #222; max-width: 1400px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.meta { color: #555; margin: 2px 0; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; white-space: nowrap; }
th { background: #f2f2f2; } td.num { text-align: right; }
tr.baseline td { background: #fff4e5; } tr.failed td { color: #8a1c1c; }
td.differs { font-weight: 600; background: #eef5ff; }
.gain { color: #1a7f37; } .loss { color: #c62828; } .noise, .other { color: #777; }
.noise { font-style: italic; } .legend { color: #555; font-size: 12px; }
svg { border: 1px solid #ddd; background: #fff; font-size: 11px; }
svg .grid { stroke: #eee; } svg .label { font-size: 11px; fill: #333; }
pre { background: #f6f8fa; padding: 8px; overflow-x: auto; font-size: 12px; }
section.run { margin-bottom: 18px; } .scroll { overflow-x: auto; }
"""


def _verdict_class(cell: Cell) -> str:
    c = cell.comparison
    if c is None:
        return ""
    return {
        Verdict.GAIN: "gain",
        Verdict.LOSS: "loss",
        Verdict.NOISE: "noise",
        Verdict.OTHER_LOAD: "other",
    }.get(c.verdict, "")


def _td(row: Row, column: Column, cell: Cell) -> str:
    classes = []
    if column.numeric:
        classes.append("num")
    if cell.differs:
        classes.append("differs")
    verdict = _verdict_class(cell)
    if verdict:
        classes.append(verdict)
    attr = f' class="{" ".join(classes)}"' if classes else ""
    return f"<td{attr}>{escape(cell_text(row, column, cell))}</td>"


def table_html(board: Board) -> str:
    """The board's table as an HTML ``<table>`` (baseline and failed rows marked)."""
    table = board.table
    notes = any(r.cause for r in table.rows)
    head = "".join(f"<th>{escape(c.title)}</th>" for c in table.columns)
    head += "<th>notes</th>" if notes else ""
    body = []
    for row in table.rows:
        failed = row.state.startswith(("failed", "died"))
        classes = [c for c, on in (("baseline", row.is_baseline), ("failed", failed)) if on]
        attr = f' class="{" ".join(classes)}"' if classes else ""
        cells = "".join(_td(row, c, row.cells[i]) for i, c in enumerate(table.columns))
        cells += f"<td>{escape(row.cause or '')}</td>" if notes else ""
        body.append(f'<tr{attr} id="row-{escape(row.label)}">{cells}</tr>')
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def before_after_html(ba: BeforeAfter) -> str:
    """Seed 003's Before / After table as HTML."""
    rows = "".join(
        f"<tr><th>{escape(r.metric.label)}</th>"
        f'<td class="num">{escape(r.metric.format(r.comparison.reference))}</td>'
        f'<td class="num">{escape(r.metric.format(r.comparison.value))}</td>'
        f"<td>{escape(r.change)}</td></tr>"
        for r in ba.rows
    )
    changes = ", ".join(
        f"{c.name} {format_value(c.old)} → {format_value(c.new)}" for c in ba.flag_changes
    )
    lines = [
        f"<table><thead><tr><th>Metric</th><th>Before ({escape(ba.before.label or '')})</th>"
        f"<th>After ({escape(ba.after.label or '')})</th><th>Improvement</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>",
        f'<p class="meta">Flags changed: {escape(changes or "none (a repeat)")}</p>',
    ]
    if not ba.like_for_like.ok:
        reasons = "; ".join(ba.like_for_like.reasons)
        lines.append(f'<p class="meta">Not like for like: {escape(reasons)}</p>')
    return "".join(lines)


def _reproduce_html(board: Board, options: ExportOptions) -> str:
    sections = []
    for row in board.table.rows:
        command = export_run(row.run, "command", options).text
        cause = f'<p class="meta">{escape(row.cause)}</p>' if row.cause else ""
        sections.append(
            f'<section class="run" id="run-{escape(row.label)}"><h3>{escape(row.label)} · '
            f"{escape(row.state)}</h3>{cause}<pre>{escape(command)}</pre></section>"
        )
    return "".join(sections)


def _selected_pair(board: Board) -> BeforeAfter | None:
    if board.baseline is None:
        return None
    chosen = next((p.run for p in board.scatter.points if p.is_selected), None)
    if chosen is None or chosen is board.baseline.run:
        return None
    return board.before_after(board.baseline.run, chosen)


def report_html(
    board: Board,
    *,
    generated: datetime,
    source: str,
    options: ExportOptions | None = None,
    capacity: Sequence[CapacityAnswer] = (),
) -> str:
    """The whole page for ``board``; ``source`` says which history it was read from;
    ``capacity``: the newest capacity answers kept in the data dir."""
    options = options or ExportOptions()
    machine = machine_line(board.runs)
    baseline = board.baseline.run if board.baseline is not None else None
    plots = "".join(
        f"<h2>Output throughput against {escape(axis.label)}</h2>"
        + scatter_svg(
            build_scatter(
                [r.run for r in board.table.rows],
                latency=name,
                baseline=baseline,
                selected=board.view.selected,
            )
        )
        for name, axis in LATENCY_AXES.items()
    )
    pair = _selected_pair(board)
    compare = (
        f"<h2>Before / After: {escape(pair.title)}</h2>{before_after_html(pair)}" if pair else ""
    )
    return "".join(
        [
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            "<title>vtc board</title>",
            f"<style>{_CSS}</style></head><body>",
            "<h1>vtc board</h1>",
            f'<p class="meta">{escape(board.header())}</p>',
            f'<p class="meta">Machine: {escape(machine)}</p>' if machine else "",
            f'<p class="meta">Read from {escape(source)} · '
            f"written {generated:%Y-%m-%d %H:%M %Z}</p>",
            '<h2>Runs</h2><div class="scroll">',
            table_html(board),
            "</div>",
            f'<p class="legend">{escape(LEGEND.replace("`", ""))}</p>',
            plots,
            compare,
            capacity_html(capacity),
            "<h2>Reproduce each run</h2>",
            _reproduce_html(board, options),
            "</body></html>\n",
        ]
    )


def write_report(path: Path, html: str) -> None:
    """Write the page atomically (a reader never sees half a report; a failed write keeps
    the old one)."""
    write_atomic(path, html, what="report")
