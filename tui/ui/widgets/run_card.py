"""One run on the results board: its end state, its flags against the baseline, its numbers.

A card renders one row of the domain's board (:class:`~tui.domain.board.table.Row`): the
flag changes, comparisons and verdicts are the domain's, so the card, the table, ``vtc
runs`` and the report never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from tui.domain.board.load_mark import load_mark
from tui.domain.board.noise import Verdict
from tui.domain.board.table import Column, ColumnKind, Row, probe_text
from tui.domain.flags.run_env import env_text
from tui.domain.flags.serve import format_value
from tui.domain.results import BenchResult, RunRecord, RunStatus, StartupProfile
from tui.ui.board_cells import (
    BASE_MARK,
    DIFFERS,
    delta_content,
    judgement_lines,
    status_style,
    sweep_mark,
)
from tui.ui.format import inert_rendering, plain, seconds, signed_percent, tokens, wrap_id

HIGHLIGHT = DIFFERS  # a flag that differs from the baseline's


@dataclass(frozen=True)
class CardContext:
    """What a card shows besides its run: the board's row and the run's place on it.

    ``columns`` are the board's (the row's cells follow them); ``baseline`` the baseline's
    label (``None``: nothing has served yet); ``live``: the run whose server is ready now
    (only it offers ``b``); ``fix_hint``: what ``f`` would do with this run's fixes, on the
    one run ``f`` takes its fix from.
    """

    row: Row
    columns: tuple[Column, ...]
    baseline: str | None = None
    live: bool = False
    fix_hint: str | None = None


def _status_line(record: RunRecord) -> Content:
    status = record.status
    text: list[str | tuple[str, str]] = [(status.value.upper(), status_style(status))]
    startup = record.startup
    if startup.seconds_to_ready is not None:
        text.append(f" up {seconds(startup.seconds_to_ready)}")
    if startup.kv_cache_tokens is not None and startup.kv_estimate_tokens is None:
        text.append(f" KV {tokens(startup.kv_cache_tokens)}")
    if status is RunStatus.STARTING and startup.stages:
        text.append(f" {startup.stages[-1].name}")
    if record.exit_code is not None and status is not RunStatus.READY:
        text.append(f" exit {record.exit_code}")
    mark = load_mark(record.bench)
    if mark is not None:  # never a plain green READY over a load that did not finish
        text.append((f" LOAD {mark.value.upper()}", "bold $warning"))
    return Content.assemble(*text)


MODEL_WIDTH = 30  # a card's text width (a longer model id wraps at its /)
ESTIMATE_OFF = 10.0  # percent: an estimate further off than this is shown as a warning


def _short_tokens(n: int) -> str:
    """``1,234,567`` -> ``1.23M``, ``98,304`` -> ``98.3k``: for a line that must fit."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.2f}M"
    if n >= 10_000:
        return f"{n / 1000:.1f}k"
    return tokens(n)


def kv_line(startup: StartupProfile) -> Content | None:
    """``KV 2,272 (est 2,300, +1.2%)``: the logged capacity, the pre-flight estimate and its
    error against it (``est 2,300`` until the server logs); ``None`` without an estimate,
    whose card keeps the capacity on its status line."""
    est, logged = startup.kv_estimate_tokens, startup.kv_cache_tokens
    if est is None:
        return None
    if logged is None:
        return Content.assemble("KV ", (f"est {tokens(est)}", "$text-muted"))
    error = (est - logged) / logged * 100 if logged else None
    style = "$warning" if error is not None and abs(error) > ESTIMATE_OFF else "$text-muted"
    shown = f", {signed_percent(error)}" if error is not None else ""
    for fmt in (tokens, _short_tokens):
        head, tail = f"KV {fmt(logged)}", f" (est {fmt(est)}{shown})"
        if len(head + tail) <= MODEL_WIDTH:
            break
    return Content.assemble(head, (tail, style))


def _model_lines(model: str) -> list[Content]:
    """The model id whole: on one line where it fits, else wrapped by meaning (the org up to
    its ``/``, then the name, broken at its hyphens if it is longer still), never cut."""
    if len(model) <= MODEL_WIDTH:
        parts = [model]
    else:
        org, slash, name = model.rpartition("/")
        pieces = [f"{org}/", name] if slash else [model]
        parts = [line for piece in pieces for line in wrap_id(piece, MODEL_WIDTH)]
    return [Content.styled(part, "$text-muted") for part in parts]


def _wrapped(text: str) -> list[Content]:
    """A flag line in the card's width, broken between words, an id at its ``/`` or ``-``."""
    return [Content(line) for line in wrap_id(text, MODEL_WIDTH)]


def own_flag_lines(record: RunRecord) -> list[Content]:
    """The model and every flag the run set (the baseline's card lists them)."""
    lines = _model_lines(record.flags.model)
    explicit = record.flags.explicit()
    for name, value in explicit.items():
        lines += _wrapped(f"{name} {format_value(value)}")
    if record.flags.extra_args:
        lines += _wrapped(" ".join(record.flags.extra_args))
    if record.flags.env:  # the run's environment is part of its configuration
        lines += _wrapped(env_text(record.flags.env))
    if not explicit and not record.flags.extra_args and not record.flags.env:
        lines.append(Content.styled("vLLM defaults", "$text-muted"))
    return lines


def _flag_change_lines(context: CardContext) -> list[Content]:
    changes = context.row.flag_changes
    if not changes:
        return [Content.styled(f"same flags as {context.baseline}", "$text-muted")]
    return [
        Content.styled(f"{c.name} {format_value(c.old)} -> {format_value(c.new)}", HIGHLIGHT)
        for c in changes
    ]


def _failure_lines(record: RunRecord, context: CardContext) -> list[Content]:
    diagnosis = record.diagnosis
    if diagnosis is None:
        return [Content.styled("start failed (no diagnosis)", "$error")]
    lines = [
        Content.styled(diagnosis.kind, "$text-muted"),
        Content.styled(diagnosis.summary, "$error"),
    ]
    for i, fix in enumerate(diagnosis.fixes, 1):
        lines.append(Content.assemble((f"fix {i}: ", "bold"), fix.title))
    if context.fix_hint and diagnosis.fixes:
        lines.append(Content.styled(context.fix_hint, "$accent"))
    return lines


def metric_lines(context: CardContext) -> list[Content]:
    """``out tok/s   720.0  +12.5%`` per metric (KV tokens are on the status line)."""
    lines = []
    for column, cell in zip(context.columns, context.row.cells, strict=True):
        if column.kind is not ColumnKind.METRIC or column.name == "kv_cache_tokens":
            continue
        head = f"{column.title:<10}{cell.text:>10}"
        comparison = cell.comparison
        if comparison is None or comparison.verdict is Verdict.OTHER_LOAD:
            lines.append(Content(head))  # another workload: the note below says so
            continue
        delta = delta_content(comparison)
        lines.append(Content.assemble(head, " ", delta) if delta.plain else Content(head))
    return lines


def _load_caveats(bench: BenchResult) -> list[Content]:
    """Warnings that change how a result reads: failures, server aborts, a cancelled run."""
    out = []
    if bench.failed:
        out.append(Content.styled(f"{bench.failed} requests failed", "$error"))
    if bench.aborted_by_server:
        text = f"{bench.aborted_by_server} streams aborted by the server"
        out.append(Content.styled(text, "$warning"))
    if bench.cancelled:
        out.append(Content.styled("cancelled: partial numbers", "$warning"))
    return out


def _comparison_notes(context: CardContext) -> list[Content]:
    row, out = context.row, []
    lfl = row.like_for_like
    if lfl is not None and not lfl.ok and row.run.bench is not None:
        out.append(Content.styled("other load, not compared:", "$warning"))
        out += [Content.styled(f" {reason}", "$warning") for reason in lfl.reasons[:2]]
    if row.repeats > 1:
        out.append(Content.styled(f"{row.repeats} runs with these settings", "$text-muted"))
    return out


def _prediction_lines(record: RunRecord) -> list[Content]:
    """The twin's prediction beside the measurement (flagged when it missed: recalibrate)."""
    pred, bench = record.prediction, record.bench
    if pred is None or bench is None:
        return []
    e2el = bench.metric("mean_e2el_ms")
    text = pred.versus(bench.output_throughput, e2el)
    if pred.missed(bench.output_throughput, e2el):
        return [Content.styled(f"! {text}: k recalibrates", "$warning")]
    return [Content.styled(text, "$text-muted")]


@inert_rendering
def card_body(record: RunRecord, context: CardContext) -> Content:
    """Every line of a card, top to bottom.

    A card leads with what changed against the baseline; the baseline's own card lists its
    flags last, after its numbers, since it may set many.
    """
    row = context.row
    lines = [_status_line(record)]
    kv = kv_line(record.startup)
    if kv is not None:
        lines.append(kv)
    if record.sweep is not None:
        probe = probe_text(record)
        trial = f"sweep {record.sweep.sweep_id} trial {record.sweep.trial}"
        lines.append(Content.styled(trial + (f" · {probe}" if probe else ""), "$accent"))
    if row.is_baseline:
        lines.append(Content.styled("the board's baseline", BASE_MARK))
    elif context.baseline is not None:
        lines += _flag_change_lines(context)
    if record.status is RunStatus.FAILED and not record.served:
        lines += _failure_lines(record, context)
    elif record.bench is not None:
        if row.judgement is not None:
            lines += judgement_lines(row.judgement)
        lines += metric_lines(context)
        lines += _load_caveats(record.bench)
        lines += _prediction_lines(record)
        lines += _comparison_notes(context)
    elif context.live and record.status is RunStatus.READY:
        lines.append(Content.styled("no load yet: b runs it", "$text-muted"))
    elif record.served:
        lines.append(Content.styled("no load was run", "$text-muted"))
    if record.status is RunStatus.FAILED and record.served and record.diagnosis is not None:
        lines += _failure_lines(record, context)  # died after serving: why, under its numbers
    if row.is_baseline or context.baseline is None:
        lines += own_flag_lines(record)
    return Content("\n").join(lines)


def card_heading(context: CardContext) -> str:
    """``#3 vs #1``, ``#1 base``, ``#4 t2 vs #1`` (a sweep's trial 2)."""
    row = context.row
    title = row.label
    mark = sweep_mark(row.run)
    if mark:
        title += f" {mark}"
    if row.is_baseline:
        return f"{title} base"
    if context.baseline is not None and row.run.bench is not None:
        return f"{title} vs {context.baseline}"
    return title


class RunCard(VerticalScroll, can_focus=False):
    """A card on the board (its text scrolls when taller than the board: Up/Down)."""

    def __init__(self, record: RunRecord, context: CardContext) -> None:
        super().__init__(classes="run-card")
        self._run = record
        self._card = context
        self._stale = False  # compose draws what it was built with

    def compose(self) -> ComposeResult:
        """The card's text."""
        yield Static(card_body(self._run, self._card), classes="card-body")

    def on_mount(self) -> None:
        """Title and status classes."""
        self._decorate()

    @property
    def record(self) -> RunRecord:
        """The run shown."""
        return self._run

    @property
    def context(self) -> CardContext:
        """Where the card sits on the board."""
        return self._card

    @property
    def stale(self) -> bool:
        """Whether the card holds a run or a board it has not drawn yet (it is out of view)."""
        return self._stale

    def show(self, record: RunRecord, context: CardContext, *, draw: bool = True) -> None:
        """Redraw for a changed run or a changed board; ``draw`` False (a card out of view):
        keep them, drawn by :meth:`draw` when the card comes into view."""
        if record == self._run and context == self._card:
            return
        self._run = record
        self._card = context
        self._stale = True
        if draw:
            self.draw()

    def draw(self) -> None:
        """Draw what :meth:`show` kept, if the card has not drawn it yet."""
        if not self._stale:
            return
        self._stale = False
        body = self.query_one(".card-body", Static)
        content = card_body(self._run, self._card)
        # A layout (of the whole screen) only when the text's height changes: a pin redraws
        # every card in view, most of them as tall as before (issue 39).
        width, height = body.content_size
        rules = body.styles.get_render_rules()
        body.update(content, layout=not width or content.get_height(rules, width) != height)
        self._decorate()

    def _decorate(self) -> None:
        self.border_title = plain(card_heading(self._card))
        for status in RunStatus:
            self.set_class(self._run.status is status, f"-{status.value}")
        self.set_class(self._card.row.is_baseline, "-baseline")
