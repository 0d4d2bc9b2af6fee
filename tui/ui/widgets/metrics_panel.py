"""The Metrics panel: the server's /metrics reduced to what tuning watches."""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from tui.domain.telemetry import ServerMetrics, SourceStatus
from tui.ui.format import na, percent


class MetricsPanel(Widget):
    """Renders the latest :class:`ServerMetrics` (KV usage, queue, token rates, cache hits)."""

    metrics: reactive[ServerMetrics | None] = reactive(None)

    def render(self) -> Content:
        """The panel's lines."""
        m = self.metrics
        if m is None:
            return Content.styled("no server metrics yet", "$text-muted")
        lines: list[Content] = []
        if m.status is not SourceStatus.OK:
            lines.append(Content.styled(f"{m.status.value}: {m.message or 'no data'}", "$warning"))
        kv_style = "$error" if m.kv_cache_usage is not None and m.kv_cache_usage >= 0.95 else ""
        lines.append(
            Content.assemble(
                "KV ",
                (percent(m.kv_cache_usage), kv_style),
                f"  run {na(m.num_running, '.0f')}",
                f"  wait {na(m.num_waiting, '.0f')}",
            )
        )
        lines.append(
            Content(
                f"tok/s in {na(m.prompt_tokens_per_s, '.0f')}"
                f" out {na(m.generation_tokens_per_s, '.0f')}"
            )
        )
        preempt_style = "$warning" if m.preemptions_total else ""
        lines.append(
            Content.assemble(
                f"hit {percent(m.prefix_cache_hit_rate)}  preempt ",
                (na(m.preemptions_total, ".0f"), preempt_style),
            )
        )
        return Content("\n").join(lines)
