"""The board as a table: one row per run, the flags that differ as columns, then metrics.

Pure, so the console's DataTable, ``vtc runs`` (text, Markdown, CSV, JSON) and the HTML
report all render the same :class:`BoardTable`. Columns, in order: the run's label, its
state (a failed start shows its diagnosis kind), one column per flag whose effective value
differs anywhere among the listed runs and the baseline (seed 000's parameter table), one
per workload field when the runs' workloads differ, then :func:`~.metrics.table_metrics`.

Ordered so the table answers first (issues 29, 39): the run, what it changed against the
baseline in one compact column (``max-num-seqs 4``), the board's verdict on that change
(``better``, ``worse``, ``noise``, ``trade-off``; ``failed`` for a start that failed: its
state in sight), the objective metrics with their change (:data:`~.metrics.HEADLINE_METRICS`)
and the latencies an SLO bounds (:data:`~.metrics.SLO_METRICS`); then its state, each
differing flag and workload field in full, the other metrics. At 80 columns the first four
show; the rest are scrolled to, and the board names them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from tui.domain.board.baseline import run_label, same_run
from tui.domain.board.judgement import Judged, Judgement, judge
from tui.domain.board.load_mark import LoadMark, load_mark
from tui.domain.board.metrics import HEADLINE_METRICS, SLO_METRICS, MetricSpec, table_metrics
from tui.domain.board.noise import Comparison, Groups, LikeForLike, Spread, compare, like_for_like
from tui.domain.board.redact import without_secret_args
from tui.domain.board.short_names import short_title
from tui.domain.diagnosis import DiagnosisKind
from tui.domain.errors import VtcError
from tui.domain.flags.run_env import ENV_FIELD, env_text
from tui.domain.flags.serve import flag_spec, flag_specs, format_value
from tui.domain.flags.serve_diff import FlagChange, diff_flags
from tui.domain.prediction import TwinMetric
from tui.domain.results import RunRecord, RunStatus
from tui.domain.workload import LoadSpec


class BoardError(VtcError):
    """A board request that cannot be met (unknown column, flag or run)."""


class ColumnKind(StrEnum):
    """What a column holds."""

    LABEL = "label"
    CHANGE = "change"  # the flags that differ from the baseline's, compact, in one cell
    VERDICT = "verdict"  # the judgement of the change (or why there is none: failed, no load)
    STATE = "state"
    SWEEP = "sweep"  # which sweep and trial a run belongs to (shown when any run has one)
    FLAG = "flag"
    WORKLOAD = "workload"
    METRIC = "metric"
    PREDICTED = "predicted"  # the twin's prediction of the run's load (shown when any has one)


@dataclass(frozen=True)
class Column:
    """One column: a stable ``key`` (``flag:max_num_seqs``, ``metric:p99_ttft_ms``...)."""

    key: str
    title: str
    kind: ColumnKind
    name: str = ""  # the flag, workload field or metric key
    metric: MetricSpec | None = None

    @property
    def numeric(self) -> bool:
        """Whether the column's values are numbers (right-aligned)."""
        return self.kind is ColumnKind.METRIC


@dataclass(frozen=True)
class Cell:
    """One value: its text, what it sorts by (``None``: N/A, always last), and context.

    Metric cells carry the :class:`~.noise.Comparison` with the baseline and the spread of
    the run's group of repeats; flag and workload cells say whether they differ from the
    baseline's value.
    """

    text: str
    sort: float | str | None
    comparison: Comparison | None = None
    spread: Spread | None = None
    differs: bool = False


@dataclass(frozen=True)
class Row:
    """One run on the board."""

    run: RunRecord
    label: str
    state: RowState
    cells: tuple[Cell, ...]
    is_baseline: bool = False
    cause: str | None = None  # a failed start's diagnosis summary
    flag_changes: tuple[FlagChange, ...] = ()  # against the baseline
    like_for_like: LikeForLike | None = None  # against the baseline
    repeats: int = 1  # runs sharing its flags and setting, itself included
    judgement: Judgement | None = None  # the change against the baseline, judged


#: Short titles of workload fields (:class:`~tui.domain.workload.LoadSpec`).
WORKLOAD_TITLES: dict[str, str] = {
    "endpoint": "endpoint",
    "input_len": "in len",
    "output_len": "out len",
    "range_ratio": "range",
    "prefix_len": "prefix",
    "num_prompts": "prompts",
    "max_concurrency": "concurrency",
    "request_rate": "rate",
    "burstiness": "burstiness",
    "seed": "seed",
    "ignore_eos": "ignore eos",
    "request_timeout_s": "timeout s",
}


@dataclass(frozen=True)
class BoardTable:
    """Columns and rows; :meth:`sorted_by` returns a re-ordered copy."""

    columns: tuple[Column, ...]
    rows: tuple[Row, ...]

    def index(self, key: str) -> int:
        """The position of column ``key``; :class:`BoardError` if there is none."""
        for i, column in enumerate(self.columns):
            if column.key == key or column.name == key or column.title == key:
                return i
        known = ", ".join(c.key for c in self.columns)
        raise BoardError(f"no column {key!r} on this board", hint=f"columns: {known}")

    def sorted_by(self, key: str, *, descending: bool = False) -> BoardTable:
        """Rows ordered by column ``key``: numbers as numbers, text as text, N/A last."""
        i = self.index(key)
        known = [r for r in self.rows if r.cells[i].sort is not None]
        missing = [r for r in self.rows if r.cells[i].sort is None]
        known.sort(key=lambda r: _sort_key(r.cells[i].sort), reverse=descending)
        return replace(self, rows=(*known, *missing))


def _sort_key(value: float | str | None) -> tuple[int, float, str]:
    if isinstance(value, int | float):
        return (0, float(value), "")
    return (1, 0.0, str(value).casefold())


class StateFilter(StrEnum):
    """Which runs a filter keeps by how they went."""

    ALL = "all"
    SERVED = "served"
    FAILED = "failed"


@dataclass(frozen=True)
class FlagMatch:
    """Keep runs whose effective ``name`` equals ``value`` (``model`` allowed)."""

    name: str
    value: Any

    def matches(self, run: RunRecord) -> bool:
        """Whether ``run``'s effective value of the flag is ``value``."""
        return flag_value(run, self.name) == self.value

    def describe(self) -> str:
        """``max_num_seqs=256``."""
        return f"{self.name}={format_value(self.value)}"


@dataclass(frozen=True)
class RowFilter:
    """Which runs the table lists: by state, and by flag values (all must match)."""

    state: StateFilter = StateFilter.ALL
    flags: tuple[FlagMatch, ...] = ()
    sweep: str | None = None
    """Only the trials of the sweep whose id starts with this."""

    def accepts(self, run: RunRecord) -> bool:
        """Whether ``run`` passes the filter."""
        if self.sweep is not None and (
            run.sweep is None or not run.sweep.sweep_id.startswith(self.sweep)
        ):
            return False
        if self.state is StateFilter.SERVED and not run.served:
            return False
        if self.state is StateFilter.FAILED and run.status is not RunStatus.FAILED:
            return False
        return all(m.matches(run) for m in self.flags)


def parse_flag_match(text: str) -> FlagMatch:
    """``NAME=VALUE`` (``max-num-seqs=256``, ``dtype=float16``, ``model=m``) as a match.

    The value is typed as the flag's own parser types it (``4k``, ``on``), so it equals the
    effective value it should match. Raises :class:`BoardError`.
    """
    name, eq, raw = text.partition("=")
    name = name.strip().lstrip("-").replace("-", "_")
    if not eq or not name:
        raise BoardError(f"filter {text!r}: expected NAME=VALUE, e.g. max_num_seqs=256")
    if name in ("model", "extra_args", "env"):
        return FlagMatch(name, raw.strip())
    try:
        spec = flag_spec(name)
    except KeyError:
        raise BoardError(f"filter {text!r}: no flag named {name!r}") from None
    try:
        return FlagMatch(name, spec.parse(raw))
    except ValueError as exc:
        raise BoardError(f"filter {text!r}: {exc}") from None


def flag_value(run: RunRecord, name: str) -> Any:
    """The effective value of flag ``name`` for ``run`` (``model``/``extra_args``/``env``
    too: the environment as its ``NAME=value`` words)."""
    if name == "model":
        return run.flags.model
    if name == "extra_args":
        return " ".join(run.flags.extra_args)
    if name == ENV_FIELD:
        return env_text(run.flags.env)
    return run.flags.effective(name)


class RowState(str):
    """A row's state, typed, shown as its text: ``ready``, ``stopped``, ``replaced``,
    ``lost``, ``failed: kv_cache_too_small``...; a load that did not finish whole says so
    (``stopped, load cancelled``)."""

    status: RunStatus
    died: bool  # failed after it was ready (a failed start otherwise)
    diagnosis: DiagnosisKind | None
    load: LoadMark | None

    @classmethod
    def of(cls, run: RunRecord) -> RowState:
        """The state of ``run``."""
        mark = load_mark(run.bench)
        diagnosis = run.diagnosis.kind if run.diagnosis is not None else None
        died = run.status is RunStatus.FAILED and run.served
        if run.status is not RunStatus.FAILED:
            text = run.status.value + (f", load {mark.value}" if mark is not None else "")
        else:
            word = "died" if died else "failed"  # died after ready vs a failed start
            text = f"{word}: {diagnosis}" if diagnosis is not None else word
        state = cls(text)
        state.status, state.died, state.diagnosis, state.load = run.status, died, diagnosis, mark
        return state


def state_text(run: RunRecord) -> RowState:
    """The state of ``run`` (see :class:`RowState`)."""
    return RowState.of(run)


def probe_text(run: RunRecord) -> str:
    """``probe 2 of #5`` for a further load on sweep trial's run #5's server, else ``""``."""
    if run.sweep is None or run.load_of is None:
        return ""
    return f"probe {run.sweep.load} of #{run.load_of}"


def sweep_text(run: RunRecord) -> str:
    """``<sweep id> t<trial>`` for a sweep's trial (``@ node gpu 0,1`` where a cluster sweep
    placed it; ``... t5 probe 2 of #12`` for a further load on that trial's server), empty
    for a hand run."""
    tag = run.sweep
    if tag is None:
        return ""
    where = f" @ {tag.where}" if tag.where else ""
    probe = probe_text(run)
    return f"{tag.sweep_id} t{tag.trial}{where}" + (f" {probe}" if probe else "")


def build_table(
    runs: Sequence[RunRecord],
    *,
    baseline: RunRecord | None = None,
    groups: Groups | None = None,
    row_filter: RowFilter | None = None,
) -> BoardTable:
    """The table of the ``runs`` that pass ``row_filter``, measured against ``baseline``."""
    runs = [without_secret_args(r) for r in runs]
    if baseline is not None:
        baseline = without_secret_args(baseline)
    groups = groups if groups is not None else Groups(runs)
    shown = [r for r in runs if (row_filter or RowFilter()).accepts(r)]
    columns = _columns(shown, baseline)
    rows = tuple(_row(run, columns, baseline, groups) for run in shown)
    return BoardTable(columns, rows)


#: The metrics that answer "did it help?" right after the verdict: the objective ones, then
#: the latencies an SLO bounds (at 120x40 the table shows five of them, issue 39).
FRONT_METRICS: tuple[MetricSpec, ...] = (
    *HEADLINE_METRICS,
    *(m for m in SLO_METRICS if m not in HEADLINE_METRICS),
)


def _columns(runs: Sequence[RunRecord], baseline: RunRecord | None) -> tuple[Column, ...]:
    listed = baseline is None or any(same_run(r, baseline) for r in runs)
    everyone = runs if listed or baseline is None else [*runs, baseline]
    flags = differing_flags(everyone)
    metrics = [
        Column(f"metric:{m.key}", m.label, ColumnKind.METRIC, m.key, m)
        for m in table_metrics(list(runs))
    ]
    columns = [*_answer_columns(bool(flags), baseline, metrics)]
    columns.append(Column("state", "state", ColumnKind.STATE))
    columns += [Column(f"flag:{name}", name, ColumnKind.FLAG, name) for name in flags]
    columns += [
        Column(f"load:{name}", WORKLOAD_TITLES.get(name, name), ColumnKind.WORKLOAD, name)
        for name in differing_workload(everyone)
    ]
    columns += [c for c in metrics if c.metric not in FRONT_METRICS]
    if any(r.prediction is not None for r in runs):
        columns.append(Column("predicted", "predicted (twin)", ColumnKind.PREDICTED))
    # Last: the run column already reads ``t7 p2``; the sweep's id is long (a console sweep's
    # names its parameters), and at 80 columns a wide column in front hid every flag and
    # metric behind it (the table shows the columns that fit whole, in order).
    if any(r.sweep is not None for r in everyone):
        columns.append(Column("sweep", "sweep", ColumnKind.SWEEP))
    return tuple(columns)


def _answer_columns(
    flags_differ: bool, baseline: RunRecord | None, metrics: Sequence[Column]
) -> list[Column]:
    """The columns that answer first: the run, what it changed, the verdict, the front
    metrics (:data:`FRONT_METRICS`)."""
    columns = [Column("label", "run", ColumnKind.LABEL)]
    if flags_differ and baseline is not None:
        columns.append(Column("change", CHANGE_TITLE, ColumnKind.CHANGE))
    if baseline is not None:
        columns.append(Column("verdict", "verdict", ColumnKind.VERDICT))
    return columns + [c for m in FRONT_METRICS for c in metrics if c.metric is m]


def differing_flags(runs: Sequence[RunRecord]) -> list[str]:
    """Flags whose effective value differs anywhere among ``runs``, in declaration order."""
    if not runs:
        return []
    names = {c.name for run in runs[1:] for c in diff_flags(runs[0].flags, run.flags)}
    order = ["model", *(s.name for s in flag_specs()), "extra_args", ENV_FIELD]
    return [n for n in order if n in names]


def differing_workload(runs: Sequence[RunRecord]) -> list[str]:
    """Workload fields that differ among the runs that have a workload."""
    loads = [r.workload for r in runs if r.workload is not None]
    if len(loads) < 2:
        return []
    dumps = [w.model_dump() for w in loads]
    return [k for k in LoadSpec.model_fields if any(d[k] != dumps[0][k] for d in dumps[1:])]


def _row(
    run: RunRecord, columns: Sequence[Column], baseline: RunRecord | None, groups: Groups
) -> Row:
    is_baseline = baseline is not None and same_run(run, baseline)
    judgement = judge(run, baseline, groups)
    cells = tuple(
        _verdict_cell(run, is_baseline, judgement)
        if c.kind is ColumnKind.VERDICT
        else _cell(run, c, baseline, groups)
        for c in columns
    )
    return Row(
        run=run,
        label=run_label(run),
        state=state_text(run),
        cells=cells,
        is_baseline=is_baseline,
        cause=run.diagnosis.summary if run.diagnosis is not None else None,
        flag_changes=tuple(diff_flags(baseline.flags, run.flags)) if baseline else (),
        like_for_like=like_for_like(run, baseline) if baseline else None,
        repeats=len(groups.members(run)),
        judgement=judgement,
    )


#: A judgement as the verdict column spells it (the card and Before / After say it whole).
VERDICT_WORDS: dict[Judged, str] = {
    Judged.BETTER: "better",
    Judged.WORSE: "worse",
    Judged.NOISE: "noise",
    Judged.TRADE_OFF: "trade-off",
    Judged.NOT_COMPARED: "other load",
}


def verdict_text(run: RunRecord, is_baseline: bool, judgement: Judgement | None) -> str:
    """``better``, ``worse``, ``noise``, ``trade-off``, ``other load``; ``baseline``; for a
    run not judged, why: ``failed`` (a start that failed), ``died``, ``no load``."""
    if is_baseline:
        return "baseline"
    if judgement is not None:
        return VERDICT_WORDS[judgement.judged]
    if run.status is RunStatus.FAILED:
        return "died" if run.served else "failed"
    if run.bench is None:
        return "no load" if run.served else run.status.value
    return ""


def _verdict_cell(run: RunRecord, is_baseline: bool, judgement: Judgement | None) -> Cell:
    text = verdict_text(run, is_baseline, judgement)
    return Cell(text, text or None)


CHANGE_TITLE = "changed"
CHANGE_NAME_CAP = 14  # a longer flag name is shortened by word (gpu-memory-utilization)


def change_text(changes: Sequence[FlagChange]) -> str:
    """What a run changed against the baseline, compact: ``max-num-seqs 4``, ``gpu-mem-util
    0.95 +2`` (two more flags: their columns and the run's card show them), ``same`` for
    none. The value is never cut (issue 17); a long flag name is shortened by word."""
    if not changes:
        return "same"
    first = changes[0]
    more = f" +{len(changes) - 1}" if len(changes) > 1 else ""
    name = first.name if len(first.name) <= CHANGE_NAME_CAP else short_title(first.name)
    name = name.replace("_", "-")
    return f"{name} {format_value(first.new)}{more}"


def _cell(run: RunRecord, column: Column, baseline: RunRecord | None, groups: Groups) -> Cell:
    if column.kind is ColumnKind.CHANGE:
        if baseline is None or same_run(run, baseline):
            return Cell("", None)
        text = change_text(diff_flags(baseline.flags, run.flags))
        return Cell(text, text, differs=text != "same")
    if column.kind is ColumnKind.LABEL:
        return Cell(run_label(run), run.id if run.id is not None else run_label(run))
    if column.kind is ColumnKind.STATE:
        return Cell(state_text(run), state_text(run))
    if column.kind is ColumnKind.SWEEP:
        return Cell(sweep_text(run), sweep_text(run))
    if column.kind is ColumnKind.FLAG:
        value = flag_value(run, column.name)
        differs = baseline is not None and flag_value(baseline, column.name) != value
        return Cell(format_value(value), _sortable(value), differs=differs)
    if column.kind is ColumnKind.WORKLOAD:
        return _workload_cell(run, column.name, baseline)
    if column.kind is ColumnKind.PREDICTED:
        return _predicted_cell(run)
    assert column.metric is not None
    comparison = compare(column.metric, run, baseline, groups)
    spread = groups.spread(run, column.metric)
    return Cell(
        column.metric.format(comparison.value),
        comparison.value,
        comparison=comparison,
        spread=spread if spread is not None and spread.n > 1 else None,
    )


def _predicted_cell(run: RunRecord) -> Cell:
    """``1,234 tok/s ±8% predicted (twin X r1, ±7% validation); off 8%`` (``!`` when it
    missed; the figure with its own metric's interval where the profile measured one)."""
    pred, bench = run.prediction, run.bench
    if pred is None:
        return Cell("", None)
    tput = pred.figure(TwinMetric.OUTPUT_THROUGHPUT) if pred.output_throughput else "won't start"
    text = f"{tput} {pred.label()}"
    miss = None
    if bench is not None:
        e2el = bench.metric("mean_e2el_ms")
        miss = pred.miss_pct(bench.output_throughput, e2el)
        if miss is not None:
            flag = "! " if pred.missed(bench.output_throughput, e2el) else ""
            text = f"{flag}{text}; off {miss:.0f}%"
    return Cell(text, miss)


def _workload_cell(run: RunRecord, name: str, baseline: RunRecord | None) -> Cell:
    if run.workload is None:
        return Cell("N/A", None)
    value = getattr(run.workload, name)
    theirs = baseline.workload if baseline is not None else None
    differs = theirs is not None and getattr(theirs, name) != value
    return Cell(format_value(value), _sortable(value), differs=differs)


def _sortable(value: Any) -> float | str | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return format_value(value)
