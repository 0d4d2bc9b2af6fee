"""The GPU panel: each GPU's memory, utilization, temperature and power, then the host.

One GPU gets a gauge; several get one row each (``*`` marks the server's GPUs). The memory
the server's own processes hold is shown where NVML gives it ("N/A (WDDM)" under WSL2,
where it never does). When there is no reading, the reason says what to do (no driver,
access blocked, a remote GPU and the flag to pass). The title carries the reading's age,
or STALE / DOWN, and "(WSL2)" under WSL2.
"""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from tui.domain.freshness import Freshness
from tui.domain.gpus import GpuRow, gpu_rows
from tui.domain.history import TelemetryHistory
from tui.domain.telemetry import GpuSample, HostSample, SourceStatus
from tui.ui.format import NA, bar, gib, gib0, na
from tui.ui.telemetry_view import fit, panel_title, recent_values, spark, wrap

SPARK_MIN = 6
SPARK_SECONDS = 120.0


def short_gpu_name(name: str, width: int = 1000) -> str:
    """``NVIDIA GeForce RTX 3080`` -> ``GeForce RTX 3080``, or ``RTX 3080`` within ``width``."""
    name = name.removeprefix("NVIDIA ").strip()
    return name if len(name) <= width else name.removeprefix("GeForce ")


def _server_memory(row: GpuRow) -> str:
    """What the server's processes hold on the GPU: ``srv 8.9G``, ``srv N/A (WDDM)``, or ''."""
    if row.server_memory is not None:
        return f"srv {gib(row.server_memory)}G"
    if row.server_memory_note is not None:
        return f"srv {row.server_memory_note}"
    return ""


class GpuPanel(Widget):
    """Renders the latest :class:`GpuSample` and :class:`HostSample` (``None``: N/A)."""

    # Repaint only: the panel's size is the strip's, whatever it shows. A layout here made
    # every second's sample lay out the whole screen, on the frame of a key that came with
    # it (issue 29: the key-latency tail).
    sample: reactive[GpuSample | None] = reactive(None)
    host: reactive[HostSample | None] = reactive(None)
    fresh: reactive[Freshness | None] = reactive(None)
    server_gpus: reactive[frozenset[int]] = reactive(frozenset())

    def __init__(
        self,
        history: TelemetryHistory | None = None,
        *,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self._history = history

    def watch_fresh(self) -> None:
        """The title carries the reading's age or state."""
        self._retitle()

    def watch_sample(self) -> None:
        """A WSL2 reading says so in the title."""
        self._retitle()

    def _retitle(self) -> None:
        wsl = self.sample is not None and self.sample.wsl
        self.border_title = panel_title("GPU", self.fresh, "(WSL2)" if wsl else "")

    def render(self) -> Content:
        """The panel's lines for the current size."""
        width = max(self.size.width, 10)
        height = max(self.size.height, 2)
        host = self.host
        room = height - (1 if host is not None else 0)
        sample = self.sample
        lines: list[Content] = []
        if sample is None:
            lines.append(Content.styled("waiting for the first reading", "$text-muted"))
        elif sample.status is not SourceStatus.OK or not sample.devices:
            lines.extend(self._absent_lines(sample, width, room))
        else:
            lines.extend(self._device_lines(sample, width, room))
        if host is not None:
            lines = lines[:room]
            lines.append(Content.styled(self._host_line(host, width), "$text-muted"))
        body = Content("\n").join(lines)
        stale = self.fresh is not None and self.fresh.state is SourceStatus.STALE
        return body.stylize("$text-muted") if stale else body

    @staticmethod
    def _absent_lines(sample: GpuSample, width: int, room: int) -> list[Content]:
        reason = sample.message or "no GPU found"
        if sample.status is not SourceStatus.UNAVAILABLE:
            reason = f"{sample.status.value}: {reason}"
        style = "$text-muted" if sample.source == "simulated" else "$warning"
        return [Content.styled(line, style) for line in wrap(reason, width, max(room, 1))]

    def _device_lines(self, sample: GpuSample, width: int, room: int) -> list[Content]:
        pids = self.host.server_pids if self.host is not None else ()
        rows = gpu_rows(sample, server_indices=self.server_gpus, server_pids=pids)
        note = sample.message  # e.g. the simulated GPU released once its simulator exited
        if len(rows) == 1:
            lines = self._one_gpu(rows[0], width)
            if note and room > len(lines):
                lines.append(Content.styled(note, "$text-muted"))
            elif note:
                lines[-1] = Content.styled(note, "$text-muted")
            return lines
        shown = rows if len(rows) <= room else rows[: max(room - 1, 1)]
        lines = [self._row_line(row, width) for row in shown]
        if len(shown) < len(rows):
            lines.append(Content.styled(f"+{len(rows) - len(shown)} more GPUs (h)", "$text-muted"))
        return lines

    def _one_gpu(self, row: GpuRow, width: int) -> list[Content]:
        fraction = None
        if row.memory_used is not None and row.memory_total:
            fraction = row.memory_used / row.memory_total
        memory = f"{gib(row.memory_used)}/{gib(row.memory_total)} GiB"
        gauge = bar(fraction, max(4, width - len(memory) - 1))
        style = "$error" if fraction is not None and fraction > 0.97 else "$accent"
        server = _server_memory(row)
        short = short_gpu_name(row.name, width - len(server) - 3)
        name = fit([(str(row.index), 3), (short, 1), (server, 2)], width)
        util = fit(
            [
                (f"util {na(row.utilization, '.0f', '%')}", 3),
                (na(row.temperature_c, ".0f", "°C"), 2),
                (na(row.power_w, ".0f", "W"), 1),
            ],
            width,
            sep="  ",
        )
        util_line = self._with_spark(util, width)
        return [Content(name), Content.assemble((gauge, style), " ", memory), util_line]

    @staticmethod
    def _row_line(row: GpuRow, width: int) -> Content:
        mark = "*" if row.server else " "
        memory = f"{gib(row.memory_used)}/{gib0(row.memory_total)}G"
        text = fit(
            [
                (f"{row.index}{mark}", 9),
                (memory, 8),
                (na(row.utilization, ".0f", "%"), 7),
                (_server_memory(row), 4),
                (na(row.temperature_c, ".0f", "°C"), 3),
                (na(row.power_w, ".0f", "W"), 2),
                (short_gpu_name(row.name, 12), 1),
            ],
            width,
        )
        return Content.styled(text, "bold") if row.server else Content(text)

    def _with_spark(self, text: str, width: int) -> Content:
        room = width - len(text) - 1
        if self._history is None or room < SPARK_MIN:
            return Content(text)
        values = recent_values(self._history, "gpu_util", SPARK_SECONDS)
        drawn = spark(values, min(room, len(values)))
        return Content.assemble(text, " ", (drawn, "$accent")) if drawn else Content(text)

    @staticmethod
    def _host_line(host: HostSample, width: int) -> str:
        if host.cpu_percent is None and host.memory_total is None:
            return f"host {NA}"
        label = host.label or "host"
        numbers = [
            (f"cpu {na(host.cpu_percent, '.0f', '%')}", 5),
            (f"ram {gib0(host.memory_used)}/{gib0(host.memory_total)}G", 3),
            (f"srv {gib(host.server_rss)}G" if host.server_rss is not None else "", 2),
        ]
        line = fit([(label, 1), *numbers], width)
        if "(WSL2)" in label and label not in line:  # too narrow for the name: WSL2 stays
            line = fit([("WSL2", 4), *numbers], width)
        return line
