"""The history screen (``h``): the panels' numbers over the last minutes, every GPU, the advice.

Charts of KV cache usage, requests running and waiting, prompt and generated tokens per
second, the server's TTFT p50, GPU memory and utilization (over the server's GPUs when
they are known) and the host's CPU, redrawn once a second from the session's history.
Below them: one row per GPU as of the newest reading, and every piece of advice that
holds, in full.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Static

from tui.domain.advice import Advice
from tui.domain.flags.serve import format_value
from tui.domain.history import TelemetryHistory
from tui.domain.telemetry import GpuSample, HostSample
from tui.ui.format import gib, na, percent
from tui.ui.telemetry_view import ms, recent_values
from tui.ui.widgets.gpu_panel import GpuPanel
from tui.ui.widgets.history_chart import HistoryChart

WINDOW_S = 300.0
"""How far back the charts reach."""

CHARTS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("kv_cache_usage", "KV cache", lambda v: percent(v, 0)),
    ("num_running", "running", lambda v: na(v, ".0f")),
    ("num_waiting", "waiting", lambda v: na(v, ".0f")),
    ("prompt_tokens_per_s", "prompt tok/s", lambda v: na(v, ".0f")),
    ("generation_tokens_per_s", "generated tok/s", lambda v: na(v, ".0f")),
    ("ttft_p50_ms", "TTFT p50 ms (server, 60 s)", ms),
    ("gpu_mem_used_bytes", "GPU memory GiB", gib),
    ("gpu_util", "GPU util", lambda v: na(v, ".0f", "%")),
    ("host_cpu_percent", "host CPU", lambda v: na(v, ".0f", "%")),
)
"""(history name, label, format) of each chart, in display order."""


def advice_text(advice: Advice, *, can_apply: bool = True) -> str:
    """One piece of advice in full: what holds, and what ``a`` would put into the form
    (attached, where ``a`` is not offered: what to try on the server)."""
    if advice.fix is None:
        return f"{advice.severity}: {advice.message}"
    settings = ", ".join(f"{k}={format_value(v)}" for k, v in advice.fix.set.items())
    what = f"a puts {settings} into the form" if can_apply else f"try {settings}"
    return f"{advice.severity}: {advice.message}\n  {what}: {advice.fix.title}"


class HistoryScreen(ModalScreen[None]):
    """The last minutes of every chart; Esc, h or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,h,q", "dismiss", "Close", key_display="Esc"),
    ]
    DEFAULT_CSS = """
    HistoryScreen {
        align: center middle;
        background: $background 60%;
    }
    #history-box {
        width: 94%;
        max-width: 110;
        height: 94%;
        border: round $accent;
        background: $surface;
        padding: 0 1;
    }
    #history-box .history-section {
        text-style: bold;
        color: $text-primary;
        margin-top: 1;
    }
    #history-gpus {
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(
        self,
        history: TelemetryHistory,
        *,
        gpu: GpuSample | None = None,
        host: HostSample | None = None,
        server_gpus: frozenset[int] = frozenset(),
        advice: tuple[Advice, ...] = (),
        refresh_s: float | None = 1.0,
        can_apply: bool = True,
    ) -> None:
        super().__init__()
        self._timer: Timer | None = None  # the redraw's, once mounted
        self._can_apply = can_apply  # False (attached): no key ``a`` to advertise
        self._history = history
        self._gpu, self._host, self._server_gpus = gpu, host, server_gpus
        self._advice = advice
        self._refresh_s = refresh_s

    def compose(self) -> ComposeResult:
        """The charts, the GPUs, the advice."""
        with VerticalScroll(id="history-box"):
            for name, label, fmt in CHARTS:
                yield HistoryChart(label, fmt, id=f"chart-{name}")
            yield Static("GPUs", classes="history-section")
            panel = GpuPanel(id="history-gpus")
            panel.sample, panel.host, panel.server_gpus = self._gpu, self._host, self._server_gpus
            devices = len(self._gpu.devices) if self._gpu is not None else 0
            panel.styles.height = max(devices, 3) + 1  # one row per GPU, then the host
            yield panel
            yield Static("Advice", classes="history-section")
            lines = [advice_text(a, can_apply=self._can_apply) for a in self._advice]
            lines = lines or ["none holds now"]
            yield Static("\n".join(lines), id="history-advice")

    def on_mount(self) -> None:
        """Title the box, draw, and redraw once a second."""
        box = self.query_one("#history-box")
        box.border_title = f"History · last {WINDOW_S / 60:.0f} min"
        box.border_subtitle = "Esc closes"
        self.redraw()
        if self._refresh_s is not None:
            self._timer = self.set_interval(self._refresh_s, self.redraw)

    def on_screen_suspend(self) -> None:
        """Closed (it may stay installed a while, tui.ui.screen_keeper) or covered: no
        redraws nobody sees."""
        if self._timer is not None:
            self._timer.pause()

    def on_screen_resume(self) -> None:
        """On top again: redraw once a second again."""
        if self._timer is not None:
            self._timer.resume()

    def redraw(self) -> None:
        """Every chart from the history as it is now."""
        for name, _, _ in CHARTS:
            values = recent_values(self._history, name, WINDOW_S)
            self.query_one(f"#chart-{name}", HistoryChart).show(values)

    async def action_dismiss(self, result: None = None) -> None:
        """Close the modal."""
        self.dismiss(result)
