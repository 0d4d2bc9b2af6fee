"""The Metrics panel: the server's /metrics reduced to what tuning watches, live.

KV cache, requests running and waiting, token rates, the server's own latency percentiles
(p50/p90/p99 over its last 60 s, each line labelled with its quantiles and unit, from its
histograms: whoever sends the traffic; a quantile its buckets cannot place reads as a bound),
prefix-cache hits and preemptions, and the advice that holds now (``a`` applies it). The
lines that matter most stay when the panel is small (80x24: four lines); the title says
how old the numbers are, or that they are stale or down.
"""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from tui.domain.advice import Advice
from tui.domain.board.fit import short_title
from tui.domain.flags.serve import format_value
from tui.domain.freshness import Freshness
from tui.domain.history import TelemetryHistory
from tui.domain.latency_text import LATENCY_LABELS, latency_text
from tui.domain.telemetry import ServerMetrics, SourceStatus
from tui.ui.format import na, percent
from tui.ui.telemetry_view import panel_title, recent_values, spark, wrap

SPARK_MIN = 6  # a sparkline narrower than this says nothing
SPARK_SECONDS = 120.0  # the last two minutes


class MetricsPanel(Widget):
    """Renders the latest :class:`ServerMetrics`, its freshness and the advice."""

    metrics: reactive[ServerMetrics | None] = reactive(None)
    fresh: reactive[Freshness | None] = reactive(None)
    advice: reactive[tuple[Advice, ...]] = reactive(())

    def __init__(
        self,
        history: TelemetryHistory | None = None,
        *,
        can_apply: bool = True,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self._history = history
        self._can_apply = can_apply  # False (attached): no "a: ..." for a key not offered

    def watch_fresh(self, fresh: Freshness | None) -> None:
        """The title carries the numbers' age or state."""
        self.border_title = panel_title("Metrics", fresh)

    def render(self) -> Content:
        """The lines that fit, most important first."""
        m = self.metrics
        width = max(self.size.width, 10)
        height = max(self.size.height, 1)
        if m is None:
            return Content.styled("no server metrics yet", "$text-muted")
        if m.status is not SourceStatus.OK:
            style = "$text-muted" if m.status is SourceStatus.UNAVAILABLE else "$warning"
            text = m.message or "no data"
            if m.status is not SourceStatus.UNAVAILABLE:
                text = f"{m.status.value}: {text}"
            return Content("\n").join(
                Content.styled(line, style) for line in wrap(text, width, height)
            )
        stale = self.fresh is not None and not self.fresh.ok
        kept, used = [], 0
        for entry in sorted(self._lines(m, width), key=lambda item: item[0]):
            rows = entry[2].plain.count("\n") + 1  # an entry shows whole or not at all
            if used + rows <= height:
                kept.append(entry)
                used += rows
        kept.sort(key=lambda item: item[1])
        body = Content("\n").join(content for _, _, content in kept)
        return body.stylize("$text-muted") if stale else body

    # (priority, order, line): the lowest priorities are kept when the panel is short.
    def _lines(self, m: ServerMetrics, width: int) -> list[tuple[int, int, Content]]:
        kv_style = "$error" if m.kv_cache_usage is not None and m.kv_cache_usage >= 0.95 else ""
        kv = Content.assemble(
            "KV ",
            (percent(m.kv_cache_usage), kv_style),
            f" run {na(m.num_running, '.0f')} wait {na(m.num_waiting, '.0f')}",
        )
        rates = (na(m.prompt_tokens_per_s, ".0f"), na(m.generation_tokens_per_s, ".0f"))
        tok = Content(f"tok/s in {rates[0]} out {rates[1]}")
        lines: list[tuple[int, int, Content]] = [
            (0, 0, self._with_spark(kv, "kv_cache_usage", width)),
            (1, 1, self._with_spark(tok, "generation_tokens_per_s", width)),
        ]
        lines.extend(self._latency_lines(m, width))
        preempt_style = "$warning" if m.preemptions_total else ""
        cache = Content.assemble(
            f"hit {percent(m.prefix_cache_hit_rate)} preempt ",
            (na(m.preemptions_total, ".0f"), preempt_style),
        )
        lines.append((6, 8, cache))
        if self.advice:
            lines.extend(advice_entries(self.advice, width, can_apply=self._can_apply))
        return lines

    def _latency_lines(self, m: ServerMetrics, width: int) -> list[tuple[int, int, Content]]:
        latency = m.latency
        if latency is None:
            return []
        texts = [latency_text(label, getattr(latency, name)) for name, label in LATENCY_LABELS]
        pairs = width >= max(len(texts[0]) + len(texts[1]), len(texts[2]) + len(texts[3])) + 2
        if not pairs:  # one line each, shortened by quantiles (labels and unit stay)
            texts = [
                latency_text(label, getattr(latency, name), width) for name, label in LATENCY_LABELS
            ]
        if pairs:  # wide: TTFT with ITL, E2E with queue
            return [
                (3, 4, Content(f"{texts[0]}  {texts[1]}")),
                (5, 5, Content(f"{texts[2]}  {texts[3]}")),
            ]
        return [(3 + i + (i > 1), 4 + i, Content(text)) for i, text in enumerate(texts)]

    def _with_spark(self, line: Content, name: str, width: int) -> Content:
        room = width - len(line.plain) - 1
        if self._history is None or room < SPARK_MIN:
            return line
        values = recent_values(self._history, name, SPARK_SECONDS)
        drawn = spark(values, min(room, len(values)))
        if not drawn:
            return line
        return Content.assemble(line, " ", (drawn, "$accent"))


def _packed(tokens: list[str], prefix: str, width: int) -> list[str]:
    """``tokens`` on lines of ``width``, the first after ``prefix``, the others indented
    under it. A ``name=value`` too long for a line takes the board's short flag name
    (``gpu_mem_util=0.95``: ``h`` and the form show the full one), else breaks at its ``=``
    (name, then value): never inside a name or a value where the width allows."""
    indent = " " * len(prefix)
    pieces: list[str] = []
    for token in tokens:
        if len(prefix) + len(token) <= width or "=" not in token:
            pieces.append(token)
            continue
        name, value = token.split("=", 1)
        short = f"{short_title(name)}={value}"
        pieces += [short] if len(prefix) + len(short) <= width else [short_title(name), f"={value}"]
    lines: list[str] = []
    current = prefix
    for piece in pieces:
        empty = current in (prefix, indent)
        candidate = f"{current}{piece}" if empty else f"{current} {piece}"
        if empty or len(candidate) <= width:
            current = candidate
        else:
            lines.append(current)
            current = f"{indent}{piece}"
    lines.append(current)
    return lines


def advice_entries(
    advice: tuple[Advice, ...], width: int, *, can_apply: bool = True
) -> list[tuple[int, int, Content]]:
    """The first piece of advice as the panel's entries, each whole or left out (never cut):
    what to set (``a: max_num_seqs=12 · preempting``; attached, where ``a`` is not offered,
    ``try max_num_seqs=12``), wrapped between settings and at a setting's ``=``; then, where
    the panel has room, the message with its numbers (``h`` shows it in full)."""
    first = advice[0]
    more = [f"(+{len(advice) - 1})"] if len(advice) > 1 else []
    style = "bold $warning" if first.severity == "warn" else "$accent"
    if first.fix is not None:
        settings = [f"{k}={format_value(v)}" for k, v in first.fix.set.items()]
        head = _packed(settings + more, "a: " if can_apply else "try ", width)
    else:
        head = _packed([first.reason, *more], "! ", width)
    why = f"· {first.reason}"
    if first.fix is not None and len(head[-1]) + 1 + len(why) <= width:
        head[-1] = f"{head[-1]} {why}"
    message = wrap(first.message, max(width - 2, 8), 99)
    return [
        (2, 9, Content.styled("\n".join(head), style)),
        (7, 10, Content.styled("\n".join(f"  {line}" for line in message), "$text-muted")),
    ]
