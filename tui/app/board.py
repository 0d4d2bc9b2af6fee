"""``vtc runs``, ``vtc export`` and ``vtc report``: the board without the console.

All three read the run history with :class:`~tui.store.history.RunStore` and render the
same :func:`~tui.domain.board.view.build_board` the console shows. The console's runs and
the demo's (``--demo``) live in separate files; when one is empty, the commands say where
they looked and where the other runs are.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from tui.app.arg_types import absolute_path
from tui.domain.board.metrics import LATENCY_AXES
from tui.domain.board.render import (
    before_after_markdown,
    board_csv,
    board_json,
    board_markdown,
    board_text,
)
from tui.domain.board.table import RowFilter, StateFilter, parse_flag_match
from tui.domain.board.view import Board, BoardView, build_board, find_run
from tui.domain.errors import VtcError
from tui.domain.export import EXPORT_FORMATS, export_run
from tui.domain.export.launch import ExportOptions
from tui.domain.results import RunRecord
from tui.store.atomic import write_atomic
from tui.store.board_file import board_path, read_board
from tui.store.capacity_answers import recent_answers
from tui.store.history import RunStore, default_data_dir, history_file
from tui.store.report import report_html, write_report
from tui.store.run_liveness import settle_gone_runs

FORMATS = ("table", "md", "csv", "json")


def history_path(demo: bool) -> Path:
    """Where the console's (or the demo's) run history lives."""
    return history_file(default_data_dir(), demo)


def read_history(path: Path) -> list[RunRecord]:
    """The runs in ``path``, oldest first; none when the file does not exist (not created).

    What the store had to do to read it (move a damaged file aside, skip bad rows) is said on
    stderr.
    """
    if not path.exists():
        return []
    store = RunStore(path)
    try:
        for lost in settle_gone_runs(store):  # the next reader sees the run's true end
            print(
                f"vtc: history: run {lost.id} closed as lost: {lost.ended_because}", file=sys.stderr
            )
        runs = store.list()
        # A damaged file moved aside, rows skipped: said on stderr, one line each, so a
        # `--json` reader still gets clean output and the operator still learns of it.
        for line in store.notice.lines():
            print(f"vtc: history: {line}", file=sys.stderr)
        return runs
    finally:
        store.close()


def saved_pin(demo: bool) -> int | None:
    """The baseline the console pinned on this history (``None``: none pinned)."""
    return read_board(board_path(history_path(demo))).pinned


def empty_message(demo: bool) -> str:
    """Where ``vtc runs`` looked, and where the other kind of runs is kept."""
    here, other = history_path(demo), history_path(not demo)
    kind, other_kind = ("demo runs", "console runs") if demo else ("runs", "demo runs")
    count = len(read_history(other))
    there = f" ({count} there)" if count else ""
    flag = "" if demo else " --demo"
    return (
        f"no {kind} in {here}; {other_kind} are kept apart in {other}{there}: "
        f"`vtc runs{flag}` lists them"
    )


def add_board_parsers(sub: Any) -> None:
    """Register ``runs``, ``export`` and ``report`` on the ``vtc`` subcommand parser."""
    runs = sub.add_parser(
        "runs",
        help="print the board: every run, differing flags, metrics",
        description="Print the board of stored runs: one row per run, the flags that differ "
        "as columns, the metrics with their change against the baseline, failures with their "
        "cause. The table fits the terminal (--wide: every column); md, csv and json too.",
    )
    runs.add_argument("--demo", action="store_true", help="the demo's history")
    runs.add_argument("--format", choices=FORMATS, default="table", help="default: table")
    runs.add_argument("--json", action="store_true", help="the full stored records as JSON")
    _view_arguments(runs)
    runs.add_argument("--sort", metavar="COLUMN", help="e.g. out tok/s, max_num_seqs, state")
    runs.add_argument("--desc", action="store_true", help="sort descending")
    runs.add_argument(
        "--show",
        choices=[s.value for s in StateFilter],
        default="all",
        help="which runs: all (default), served or failed",
    )
    runs.add_argument("--sweep", metavar="ID", help="only the trials of this sweep (id prefix)")
    runs.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="FLAG=VALUE",
        help="only runs with this effective flag value (repeatable)",
    )
    runs.add_argument(
        "--compare",
        nargs=2,
        metavar=("BEFORE", "AFTER"),
        help="print the Before / After table of two runs instead",
    )
    runs.add_argument(
        "--wide",
        action="store_true",
        help="table: every column at full width (default: fit the terminal, naming what is "
        "left out)",
    )

    export = sub.add_parser(
        "export",
        help="write a run as a command, config YAML, compose...",
        description="Write one stored run as a shell command, a vLLM --config YAML, a compose "
        "service, a systemd unit or a Kubernetes Deployment (secrets only by name).",
    )
    export.add_argument("run", metavar="RUN", help="run id, #id, label, or last")
    export.add_argument(
        "--as", dest="fmt", choices=EXPORT_FORMATS, required=True, help="the format written"
    )
    export.add_argument("--demo", action="store_true", help="a run of the demo's history")
    export.add_argument("-o", "--output", type=Path, help="write to this file (default: stdout)")
    export.add_argument(
        "--exec", dest="executable", type=absolute_path, help="systemd: absolute path of vllm"
    )

    report = sub.add_parser(
        "report",
        help="write the board as one self-contained HTML page",
        description="Write the board as one HTML page with no outside requests: the table, "
        "the throughput/latency plot with its Pareto frontier, each run's command.",
    )
    report.add_argument("--demo", action="store_true", help="the demo's history")
    report.add_argument(
        "-o", "--output", type=Path, required=True, metavar="FILE.html", help="the page written"
    )
    _view_arguments(report)
    report.add_argument("--selected", metavar="RUN", help="the run marked as selected")


def _view_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--baseline",
        metavar="RUN",
        help="the baseline (default: the one pinned in the console, else the first completed "
        "load of the newest run's workload)",
    )
    parser.add_argument(
        "--latency",
        choices=list(LATENCY_AXES),
        default="ttft",
        help="the latency the plot and the Pareto frontier use (default ttft: p99 TTFT)",
    )


def table_width(wide: bool, out: TextIO) -> int | None:
    """The width ``vtc runs`` fits its table to: ``COLUMNS`` when set, else the terminal's;
    ``None`` (full width) with ``--wide`` or when the output is not a terminal (a pipe or a
    file keeps whole rows for the next program)."""
    if wide:
        return None
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if not out.isatty():
        return None
    return shutil.get_terminal_size().columns


def run_board_command(args: argparse.Namespace) -> int:
    """Dispatch ``runs``/``export``/``report``; a :class:`VtcError` is one line, exit 2."""
    try:
        if args.command == "runs":
            return _runs(args)
        if args.command == "export":
            return _export(args)
        return _report(args)
    except VtcError as exc:
        print(f"vtc: {exc.one_line()}", file=sys.stderr)
        return 2


def _board(
    runs: list[RunRecord],
    args: argparse.Namespace,
    *,
    row_filter: RowFilter | None = None,
    selected: int | None = None,
) -> Board:
    # --baseline wins; else the pin the console keeps beside this history (issue 29)
    pinned = find_run(runs, args.baseline).id if args.baseline else saved_pin(args.demo)
    view = BoardView(
        pinned=pinned,
        sort=getattr(args, "sort", None),
        descending=getattr(args, "desc", False),
        filter=row_filter or RowFilter(),
        latency=args.latency,
        selected=selected,
    )
    return build_board(runs, view)


def _runs(args: argparse.Namespace) -> int:
    runs = read_history(history_path(args.demo))
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in runs], indent=2))
        return 0
    sweep = getattr(args, "sweep", None)
    if not runs and (args.compare or args.baseline or sweep):  # a named run or sweep asked
        raise VtcError(empty_message(args.demo))  # for, none there: an error, as export's
    if not runs:
        print(f"vtc runs: {empty_message(args.demo)}", file=sys.stderr)
        return 0
    if args.compare:
        board = _board(runs, args)
        print(before_after_markdown(board.before_after(*args.compare)), end="")
        return 0
    if sweep:
        _check_sweep(runs, sweep)
    row_filter = RowFilter(
        StateFilter(args.show), tuple(parse_flag_match(w) for w in args.where), sweep=sweep
    )
    board = _board(runs, args, row_filter=row_filter)
    if args.format == "json":
        print(json.dumps(board_json(board), indent=2))
    else:
        if args.format == "table":
            print(board_text(board, table_width(args.wide, sys.stdout)), end="")
        else:
            print({"md": board_markdown, "csv": board_csv}[args.format](board), end="")
    return 0


def _check_sweep(runs: list[RunRecord], prefix: str) -> None:
    """``--sweep ID``: some run must belong to a sweep whose id starts with ``prefix`` (an
    empty board for a mistyped id would read as a sweep that ran nothing)."""
    known = sorted({r.sweep.sweep_id for r in runs if r.sweep is not None})
    if not any(k.startswith(prefix) for k in known):
        listed = ", ".join(k[:12] for k in known[-5:]) or "none on this history"
        raise VtcError(f"no sweep with an id starting {prefix!r} (sweeps: {listed})")


def _export(args: argparse.Namespace) -> int:
    runs = read_history(history_path(args.demo))
    if not runs:
        raise VtcError(empty_message(args.demo))
    run = find_run(runs, args.run)
    options = ExportOptions(demo=args.demo)
    if args.executable:
        options = ExportOptions(executable=args.executable, demo=args.demo)
    exported = export_run(run, args.fmt, options)
    if args.output is None:
        print(exported.text, end="")
        return 0
    _write(args.output, exported.text)
    print(f"vtc export: wrote {args.output} (usually named {exported.filename})", file=sys.stderr)
    return 0


def _report(args: argparse.Namespace) -> int:
    path = history_path(args.demo)
    runs = read_history(path)
    if not runs:
        raise VtcError(empty_message(args.demo))
    selected = find_run(runs, args.selected).id if args.selected else runs[-1].id
    board = _board(runs, args, selected=selected)
    html = report_html(
        board,
        generated=datetime.now(UTC),
        source=str(path),
        options=ExportOptions(demo=args.demo),
        capacity=recent_answers(default_data_dir(), most=3),
    )
    write_report(args.output, html)  # a full disk: one line, the old report kept
    print(f"vtc report: wrote {args.output} ({len(board.table.rows)} runs)", file=sys.stderr)
    return 0


def _write(path: Path, text: str) -> None:
    write_atomic(path, text, what="export")
