"""One run on the results board: its flags against the first card, its start, its numbers."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from tui.domain.flags import diff_flags, format_value
from tui.domain.results import BenchResult, RunRecord, RunStatus, StartupProfile
from tui.ui.compare import CARD_METRICS, CardMetric, delta
from tui.ui.format import NA, seconds, signed_percent, tokens

HIGHLIGHT = "bold $warning"  # a flag that differs from the first card


@dataclass(frozen=True)
class CardContext:
    """Where a card sits on the board and what it is compared with."""

    number: int  # 1-based position on the board
    baseline: RunRecord | None  # the first card's run; None for the first card itself
    reference: tuple[int, BenchResult] | None = None  # (card number, result) bench deltas use
    fix_hint: bool = False  # the latest failed run: ``f`` applies its first fix


def card_title(record: RunRecord, number: int) -> str:
    """``#3`` or ``#3 label``: the run's label when it is not just its number."""
    label = record.label.strip()
    if not label or label == f"#{number}":
        return f"#{number}"
    return label if label.startswith("#") else f"#{number} {label}"


def _status_line(record: RunRecord) -> Content:
    status = record.status
    if status is RunStatus.READY:
        parts = [("READY", "bold $success")]
    elif status is RunStatus.FAILED:
        parts = [("FAILED", "bold $error")]
    elif status is RunStatus.STARTING:
        parts = [("STARTING", "bold $warning")]
    else:
        parts = [(status.value.upper(), "bold $text-muted")]
    text: list[str | tuple[str, str]] = list(parts)
    startup = record.startup
    if startup.seconds_to_ready is not None:
        text.append(f" up {seconds(startup.seconds_to_ready)}")
    if startup.kv_cache_tokens is not None and startup.kv_estimate_tokens is None:
        text.append(f" KV {tokens(startup.kv_cache_tokens)}")
    if status is RunStatus.STARTING and startup.stages:
        text.append(f" {startup.stages[-1].name}")
    if record.exit_code is not None and status is not RunStatus.READY:
        text.append(f" exit {record.exit_code}")
    return Content.assemble(*text)


MODEL_WIDTH = 30  # a card's text width: long model ids keep their informative tail
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


def _model_line(model: str) -> Content:
    shown = model if len(model) <= MODEL_WIDTH else "…" + model[-(MODEL_WIDTH - 1) :]
    return Content.styled(shown, "$text-muted")


def _flag_lines(record: RunRecord, context: CardContext) -> list[Content]:
    if context.baseline is None:
        lines = [_model_line(record.flags.model)]
        explicit = record.flags.explicit()
        lines += [Content(f"{name} {format_value(value)}") for name, value in explicit.items()]
        if record.flags.extra_args:
            lines.append(Content(" ".join(record.flags.extra_args)))
        if not explicit and not record.flags.extra_args:
            lines.append(Content.styled("vLLM defaults", "$text-muted"))
        return lines
    changes = diff_flags(context.baseline.flags, record.flags)
    if not changes:
        return [Content.styled("same flags as #1", "$text-muted")]
    return [
        Content.styled(f"{c.name} {format_value(c.old)} -> {format_value(c.new)}", HIGHLIGHT)
        for c in changes
    ]


def _metric_line(metric: CardMetric, bench: BenchResult, context: CardContext) -> Content:
    value = bench.metric(metric.key)
    if value is None:
        shown = NA
    elif metric.unit == "ms":
        shown = f"{value:.1f} ms"
    elif metric.key == "request_throughput":
        shown = f"{value:.2f}"
    else:
        shown = f"{value:.1f}"
    parts: list[str | tuple[str, str]] = [f"{metric.label:<10}{shown:>10}"]
    ref = context.reference
    if ref is not None and ref[0] != context.number:
        change = delta(metric, value, ref[1].metric(metric.key))
        if change is not None:
            style = (
                "$text-muted"
                if change.percent == 0
                else ("$success" if change.better else "$error")
            )
            parts.append((f" {signed_percent(change.percent):>8}", style))
    return Content.assemble(*parts)


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


def card_body(record: RunRecord, context: CardContext) -> Content:
    """Every line of a card, top to bottom.

    A later card leads with what changed against the first; the first card lists its flags
    last, after its numbers, since it may set many.
    """
    is_first = context.baseline is None
    lines = [_status_line(record)]
    kv = kv_line(record.startup)
    if kv is not None:
        lines.append(kv)
    if not is_first:
        lines += _flag_lines(record, context)
    if record.status is RunStatus.FAILED:
        diagnosis = record.diagnosis
        if diagnosis is None:
            lines.append(Content.styled("start failed (no diagnosis)", "$error"))
        else:
            lines.append(Content.styled(diagnosis.kind, "$text-muted"))
            lines.append(Content.styled(diagnosis.summary, "$error"))
            for i, fix in enumerate(diagnosis.fixes, 1):
                lines.append(Content.assemble((f"fix {i}: ", "bold"), fix.title))
            if context.fix_hint and diagnosis.fixes:
                lines.append(Content.styled("f applies fix 1 and restarts", "$accent"))
    elif record.bench is not None:
        lines += [_metric_line(m, record.bench, context) for m in CARD_METRICS]
        lines += _load_caveats(record.bench)
    elif record.status is RunStatus.READY:
        lines.append(Content.styled("no load yet: b runs it", "$text-muted"))
    if is_first:
        lines += _flag_lines(record, context)
    return Content("\n").join(lines)


class RunCard(VerticalScroll, can_focus=False):
    """A card on the board (scrolls itself when its text is taller than the board)."""

    def __init__(self, record: RunRecord, context: CardContext) -> None:
        super().__init__(classes="run-card")
        self._run = record
        self._card = context

    def compose(self) -> ComposeResult:
        """The card's text."""
        yield Static(card_body(self._run, self._card), classes="card-body")

    def on_mount(self) -> None:
        """Title, subtitle and status class."""
        self._decorate()

    @property
    def record(self) -> RunRecord:
        """The run shown."""
        return self._run

    def show(self, record: RunRecord, context: CardContext) -> None:
        """Redraw for a changed run or a changed board."""
        if record == self._run and context == self._card:
            return
        self._run = record
        self._card = context
        self.query_one(".card-body", Static).update(card_body(record, context))
        self._decorate()

    def _decorate(self) -> None:
        title = card_title(self._run, self._card.number)
        ref = self._card.reference
        if ref is not None and ref[0] != self._card.number and self._run.bench is not None:
            title += f" (vs #{ref[0]})"  # which card the deltas compare with
        self.border_title = title
        for status in RunStatus:
            self.set_class(self._run.status is status, f"-{status.value}")
