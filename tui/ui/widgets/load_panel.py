"""The Load panel: progress of the running load, its live rates and latencies."""

from __future__ import annotations

import math

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Sparkline, Static

from tui.domain.results import BenchResult
from tui.domain.workload import LoadProgress, LoadSpec
from tui.ui.format import na

LAG_WARN_MS = 50.0  # above this the client, not the server, limits the numbers
SPARK_POINTS = 120


def _spec_line(spec: LoadSpec) -> str:
    conc = "" if spec.max_concurrency is None else f" c{spec.max_concurrency}"
    rate = "" if math.isinf(spec.request_rate) else f" @{spec.request_rate:g}/s"
    return f"{spec.num_prompts} req {spec.input_len}->{spec.output_len} tok{conc}{rate}"


class LoadPanel(Vertical):
    """Renders :class:`LoadProgress` updates, then the :class:`BenchResult` or the error."""

    def __init__(
        self, spec: LoadSpec, *, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(id=id, classes=classes)
        self._spec = spec
        self._progress: LoadProgress | None = None
        self._result: BenchResult | None = None
        self._error: str | None = None
        self._rates: list[float] = []

    def compose(self) -> ComposeResult:
        """Summary lines, the tok/s sparkline, the latency line."""
        yield Static(id="load-summary")
        yield Sparkline([], id="load-spark")
        yield Static(id="load-latency")

    def on_mount(self) -> None:
        """Draw the idle state."""
        self._redraw()

    def on_resize(self) -> None:
        """Units appear or go with the width."""
        self._redraw()

    def show_spec(self, spec: LoadSpec) -> None:
        """The workload the next ``b`` will run (shown while idle)."""
        self._spec = spec
        self._redraw()

    def clear(self) -> None:
        """A new server: the last load's numbers belong to the old one (its card keeps them)."""
        self.start(self._spec)

    def start(self, spec: LoadSpec) -> None:
        """A new load run begins: forget the last one."""
        self._spec = spec
        self._progress = None
        self._result = None
        self._error = None
        self._rates = []
        self._redraw()

    def show_progress(self, progress: LoadProgress) -> None:
        """One progress tick."""
        self._progress = progress
        self._rates = [*self._rates, progress.output_tokens_per_s][-SPARK_POINTS:]
        self._redraw()

    def show_finished(self, result: BenchResult | None, error: str | None) -> None:
        """The run ended with ``result`` or ``error``."""
        self._result = result
        self._error = error
        self._redraw()

    def _redraw(self) -> None:
        if not self.is_mounted:
            return
        summary, latency = self._lines()
        # Their heights are fixed (the stylesheet's): a tick repaints them, it lays out
        # nothing (a layout per progress tick was a whole-screen layout under load, issue 29).
        self.query_one("#load-summary", Static).update(summary, layout=False)
        self.query_one("#load-latency", Static).update(latency, layout=False)
        spark = self.query_one("#load-spark", Sparkline)
        spark.data = list(self._rates)
        shown = bool(self._rates)  # an empty sparkline reads as "zero"
        if spark.display != shown:  # unchanged: no layout
            spark.display = shown

    def _lines(self) -> tuple[Content, Content]:
        width = self.size.width
        if self._error is not None:
            return Content.styled(f"load failed: {self._error}", "$error"), Content("")
        result = self._result
        if result is not None:
            return _finished(result, width), Content(
                _latency(
                    width,
                    result.metric("median_ttft_ms"),
                    result.metric("p99_ttft_ms"),
                    result.metric("median_itl_ms"),
                    result.metric("p99_itl_ms"),
                )
            )
        p = self._progress
        if p is None:
            return (
                Content.assemble(("idle", "$text-muted"), " · b runs\n", _spec_line(self._spec)),
                Content(""),
            )
        lag = p.loop_lag_ms
        warn: tuple[str, str] = ("", "")
        if p.client_bound:
            # The client, not the server, limits these numbers (busy core or late loop).
            warn = (" CLIENT-BOUND", "bold $warning")
        elif lag is not None and lag >= LAG_WARN_MS:
            warn = (f" lag {lag:.0f}ms!", "bold $warning")
        fail_style = "$error" if p.failed else ""
        head = Content.assemble(
            f"done {p.done}/{p.total} fail ",
            (str(p.failed), fail_style),
            f" fly {p.in_flight}\n",
            f"{p.output_tokens_per_s:.1f} tok/s out",
            warn,
        )
        lat = _latency(width, p.ttft_p50_ms, p.ttft_p99_ms, p.itl_p50_ms, p.itl_p99_ms)
        return head, Content(lat)


def _finished(result: BenchResult, width: int) -> Content:
    """``done 3.0 s: 32 ok, 0 failed`` (``cancelled`` when cut short), shortened to ``width``
    by dropping the duration, then the spaces: the counts keep their labels. Then the rates."""
    word, style = ("cancelled", "bold $warning") if result.cancelled else ("done", "$success")
    ok, failed = f"{result.completed} ok", f"{result.failed} failed"
    forms = (
        f" {result.duration:.1f} s: {ok}, ",
        f": {ok}, ",
        f": {ok}/",
        f" {ok}/",
    )
    middle = next((f for f in forms if len(word + f + failed) <= width), forms[-1])
    return Content.assemble(
        (word, style),
        middle,
        (failed, "$error" if result.failed else ""),
        "\n",
        f"{result.output_throughput:.1f} tok/s {result.request_throughput:.2f} req/s",
    )


def _latency(
    width: int,
    ttft50: float | None,
    ttft99: float | None,
    itl50: float | None,
    itl99: float | None,
) -> str:
    """``TTFT p50/99 118/330 ms ITL p50/99 22/48 ms``, dropping ITL when it does not fit."""
    ttft = f"TTFT p50/99 {na(ttft50, '.0f')}/{na(ttft99, '.0f')} ms"
    itl = f"ITL p50/99 {na(itl50, '.0f')}/{na(itl99, '.0f')} ms"
    both = f"{ttft} · {itl}"
    return both if len(both) <= width else ttft
