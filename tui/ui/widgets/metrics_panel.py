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
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self._history = history

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
        lines = self._lines(m, width)
        kept = sorted(sorted(lines, key=lambda item: item[0])[:height], key=lambda item: item[1])
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
            lines.append((2, 9, _advice_line(self.advice[0], len(self.advice))))
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


def _advice_line(advice: Advice, count: int) -> Content:
    """``a: max_num_seqs=12 · 3 preemptions ...`` (the fix first: it is what ``a`` does)."""
    more = f" (+{count - 1})" if count > 1 else ""
    if advice.fix is not None:
        settings = " ".join(f"{k}={format_value(v)}" for k, v in advice.fix.set.items())
        text = f"a: {settings}{more} · {advice.message}"
    else:
        text = f"! {advice.message}{more}"
    style = "bold $warning" if advice.severity == "warn" else "$accent"
    return Content.styled(text, style)
