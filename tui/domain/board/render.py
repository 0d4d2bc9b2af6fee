"""The board as text: a plain table, Markdown in seed 000's shape, CSV, JSON; Before/After.

All of them render :class:`~.view.Board`'s table, so every surface shows the same columns,
values and verdicts. Deltas read ``+12.0%`` (against the baseline), ``~+3.1%`` (inside the
spread of repeated runs: noise) or ``(other load)`` (a different workload: not compared).
"""

from __future__ import annotations

import csv
import io
import textwrap
from collections.abc import Sequence
from typing import Any

from tui.domain.board.baseline import run_label
from tui.domain.board.before_after import BeforeAfter
from tui.domain.board.fit import fit_grid
from tui.domain.board.load_mark import load_mark
from tui.domain.board.noise import Comparison, Verdict
from tui.domain.board.table import Cell, Column, ColumnKind, Row
from tui.domain.board.view import Board
from tui.domain.flags.serve import format_value
from tui.domain.results import RunRecord

LEGEND = (
    "`+x%`: change against the baseline · `~+x%`: inside the spread of repeated runs "
    "(noise, not a gain) · `(other load)`: a different workload or machine, not compared"
)


def delta_text(comparison: Comparison | None) -> str:
    """``+12.0%``, ``~+3.1%`` (noise), ``(other load)`` or ``""`` (baseline, N/A)."""
    if comparison is None:
        return ""
    if comparison.verdict is Verdict.OTHER_LOAD:
        return "(other load)"
    if comparison.percent is None or comparison.verdict in (Verdict.BASELINE, Verdict.NA):
        return ""
    change = f"{comparison.percent:+.1f}%"
    return "~" + change if comparison.verdict is Verdict.NOISE else change


def cell_text(row: Row, column: Column, cell: Cell) -> str:
    """A cell as text renderers show it: the label marks the baseline, metrics their delta."""
    if column.kind is ColumnKind.LABEL and row.is_baseline:
        return f"{cell.text} (base)"
    if column.kind is ColumnKind.METRIC:
        delta = delta_text(cell.comparison)
        return f"{cell.text} {delta}" if delta else cell.text
    return cell.text


def machine_line(runs: Sequence[RunRecord]) -> str | None:
    """``NVIDIA H100 80GB ×1 · vLLM 0.32.0 · driver 550.54 · CUDA 12.4`` when all runs agree."""
    facts = {
        (
            r.repro.gpu_name,
            r.repro.gpu_count,
            r.repro.vllm_version,
            r.repro.driver_version,
            r.repro.cuda_version,
        )
        for r in runs
        if r.repro is not None
    }
    if len(facts) != 1:
        return None
    gpu, count, vllm, driver, cuda = facts.pop()
    parts = [
        f"{gpu} ×{count}" if gpu and count else gpu,
        f"vLLM {vllm}" if vllm else None,
        f"driver {driver}" if driver else None,
        f"CUDA {cuda}" if cuda else None,
    ]
    shown = [p for p in parts if p]
    return " · ".join(shown) if shown else None


# -- plain text ---------------------------------------------------------------------------------
def not_compared(row: Row) -> str | None:
    """``not compared: other workload: input 128 vs 256``: why a measured row has no delta."""
    lfl = row.like_for_like
    if lfl is None or lfl.ok or row.run.bench is None or row.is_baseline:
        return None
    return "not compared: " + "; ".join(lfl.reasons)


def row_notes(row: Row) -> str:
    """What the notes column says: a failure's cause, why a row is not compared."""
    return " · ".join(n for n in (row.cause, not_compared(row)) if n)


def board_text(board: Board, width: int | None = None) -> str:
    """An aligned plain-text table with the header line (``vtc runs``).

    ``width``: the terminal's; the table is narrowed to fit (:mod:`~.fit`) and the text
    lines wrapped, saying which columns were left out. ``None``: every column, full width.
    """
    lines = _wrapped(board.header(), width) + _table_lines(board, width)
    table = board.table
    causes = [f"  {r.label}: {r.cause}" for r in table.rows if r.cause]
    if causes:
        lines += ["", "causes:", *_wrapped_all(causes, width)]
    apart = [f"  {r.label}: {why}" for r in table.rows if (why := not_compared(r))]
    if apart:
        lines += ["", "not compared with the baseline:", *_wrapped_all(apart, width)]
    return "\n".join(lines) + "\n"


def _table_lines(board: Board, width: int | None) -> list[str]:
    """The table's aligned rows (narrowed to ``width``, naming the columns left out)."""
    table = board.table
    grid = [[c.title for c in table.columns]]
    grid += [[cell_text(r, c, r.cells[i]) for i, c in enumerate(table.columns)] for r in table.rows]
    fitted = fit_grid(table.columns, grid, width) if width is not None else None
    columns = fitted.columns if fitted is not None else tuple(table.columns)
    rows = fitted.grid if fitted is not None else grid
    widths = [max(len(line[i]) for line in rows) for i in range(len(columns))]
    lines = []
    for n, line in enumerate(rows):
        cells = [
            text.rjust(w) if col.numeric and n > 0 else text.ljust(w)
            for text, w, col in zip(line, widths, columns, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    if fitted is not None and fitted.dropped:
        left_out = f"--wide shows every column; not shown: {', '.join(fitted.dropped)}"
        lines += _wrapped(left_out, width)
    return lines


def _wrapped_all(texts: list[str], width: int | None) -> list[str]:
    return [w for t in texts for w in _wrapped(t, width, "      ")]


def _wrapped(text: str, width: int | None, indent: str = "") -> list[str]:
    if width is None or len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False) or [text]


# -- Markdown -------------------------------------------------------------------------------------
def _md(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def board_markdown(board: Board) -> str:
    """Markdown in seed 000's shape: flags that differ as columns, failures with their cause."""
    table = board.table
    notes = any(row_notes(r) for r in table.rows)
    titles = [f"`{c.title}`" if c.kind is ColumnKind.FLAG else c.title for c in table.columns]
    titles += ["notes"] if notes else []
    aligns = ["---:" if c.numeric else "---" for c in table.columns] + (["---"] if notes else [])
    lines = [f"**Runs**: {board.header()}", ""]
    machine = machine_line(board.runs)
    if machine:
        lines += [f"**Machine**: {machine}", ""]
    lines += ["| " + " | ".join(titles) + " |", "|" + "|".join(aligns) + "|"]
    for row in table.rows:
        cells = [_md_cell(row, c, row.cells[i]) for i, c in enumerate(table.columns)]
        cells += [_md(row_notes(row))] if notes else []
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", LEGEND]
    return "\n".join(lines) + "\n"


def _md_cell(row: Row, column: Column, cell: Cell) -> str:
    text = _md(cell_text(row, column, cell))
    if cell.differs:
        return f"**{text}**"  # differs from the baseline's value
    return text


# -- CSV and JSON ---------------------------------------------------------------------------------
def board_csv(board: Board) -> str:
    """One line per run: raw numbers (no units), deltas in percent, for a spreadsheet."""
    table = board.table
    metrics = [(i, c) for i, c in enumerate(table.columns) if c.kind is ColumnKind.METRIC]
    others = [(i, c) for i, c in enumerate(table.columns) if c.kind in _CSV_TEXT_KINDS]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_csv_header([c for _, c in others], [c for _, c in metrics]))
    for row in table.rows:
        texts = [row.cells[i].text for i, _ in others]
        writer.writerow(_csv_row(row, texts, [row.cells[i].comparison for i, _ in metrics]))
    return out.getvalue()


#: The columns CSV carries as their text (metrics go as raw numbers and percents).
_CSV_TEXT_KINDS = (ColumnKind.SWEEP, ColumnKind.FLAG, ColumnKind.WORKLOAD)


def _csv_header(others: list[Column], metrics: list[Column]) -> list[str]:
    """The CSV's titles: the run, its text columns, each metric's value then its change."""
    return [
        "id",
        "label",
        "baseline",
        "state",
        "verdict",
        *(c.title for c in others),
        *(_metric_title(c) for c in metrics),
        *(f"{c.title} vs baseline %" for c in metrics),
        "cause",
        "not compared",
    ]


def _csv_row(row: Row, texts: list[str], compared: list[Comparison | None]) -> list[object]:
    """One run's CSV line, in :func:`_csv_header`'s order."""
    judgement = row.judgement
    return [
        row.run.id if row.run.id is not None else "",
        row.label,
        int(row.is_baseline),
        row.state,
        judgement.judged.value if judgement is not None else "",
        *texts,
        *("" if c is None or c.value is None else repr(c.value) for c in compared),
        *("" if c is None or c.percent is None else f"{c.percent:.2f}" for c in compared),
        row.cause or "",
        (not_compared(row) or "").removeprefix("not compared: "),
    ]


def _metric_title(column: Column) -> str:
    return column.metric.title if column.metric is not None else column.title


def board_json(board: Board) -> dict[str, Any]:
    """The table as JSON: columns, then rows keyed by column key (values, deltas, verdicts)."""
    baseline = board.baseline
    return {
        "header": board.header(),
        "baseline": None
        if baseline is None
        else {
            "id": baseline.run.id,
            "label": baseline.label,
            "reason": baseline.reason.value,
        },
        "columns": [
            {"key": c.key, "title": c.title, "kind": c.kind.value} for c in board.table.columns
        ],
        "rows": [_json_row(board, row) for row in board.table.rows],
    }


def _json_row(board: Board, row: Row) -> dict[str, Any]:
    cells: dict[str, Any] = {}
    for column, cell in zip(board.table.columns, row.cells, strict=True):
        entry: dict[str, Any] = {"text": cell.text, "value": cell.sort}
        if column.kind in (ColumnKind.FLAG, ColumnKind.WORKLOAD):
            entry["differs_from_baseline"] = cell.differs
        if cell.comparison is not None:
            entry.update(
                percent=cell.comparison.percent,
                verdict=cell.comparison.verdict.value,
                confirmed=cell.comparison.confirmed,
            )
        if cell.spread is not None:
            entry["spread"] = {"low": cell.spread.low, "high": cell.spread.high, "n": cell.spread.n}
        cells[column.key] = entry
    lfl = row.like_for_like
    return {
        "id": row.run.id,
        "label": row.label,
        "baseline": row.is_baseline,
        "state": row.state,
        "cause": row.cause,
        "judgement": None if row.judgement is None else row.judgement.text(),
        "repeats": row.repeats,
        "load": _load_json(row.run),
        "probe": _probe_json(row.run),
        "like_for_like": None if lfl is None else {"ok": lfl.ok, "reasons": list(lfl.reasons)},
        "flag_changes": [
            {"flag": c.name, "baseline": format_value(c.old), "run": format_value(c.new)}
            for c in row.flag_changes
        ],
        "cells": cells,
    }


def _probe_json(run: RunRecord) -> dict[str, int] | None:
    """A sweep probe's trial run and load number (``probe 2 of #5``: ``{"of": 5, "load": 2}``)."""
    if not run.probe or run.sweep is None or run.load_of is None:
        return None
    return {"of": run.load_of, "load": run.sweep.load}


def _load_json(run: RunRecord) -> str | None:
    mark = load_mark(run.bench)
    return mark.value if mark is not None else None


# -- Before / After --------------------------------------------------------------------------------
def before_after_markdown(ba: BeforeAfter) -> str:
    """Seed 003's table: ``| Metric | Before | After | Improvement |``, then what changed."""
    before, after = run_label(ba.before), run_label(ba.after)
    lines = [
        f"| Metric | Before ({before}) | After ({after}) | Improvement |",
        "|--------|--------|-------|-------------|",
    ]
    for row in ba.rows:
        c = row.comparison
        lines.append(
            f"| **{row.metric.label}** | {row.metric.format(c.reference)} | "
            f"{row.metric.format(c.value)} | {row.change} |"
        )
    lines.append("")
    if ba.judgement is not None:
        lines += [f"Verdict: {ba.judgement.text()}", ""]
    if ba.flag_changes:
        changed = ", ".join(
            f"`{c.name}` {format_value(c.old)} → {format_value(c.new)}" for c in ba.flag_changes
        )
        lines.append(f"Flags changed: {changed}")
    else:
        lines.append("Flags changed: none (a repeat: any difference is noise)")
    if not ba.like_for_like.ok:
        lines.append("Not like for like: " + "; ".join(ba.like_for_like.reasons))
    return "\n".join(lines) + "\n"
