"""The GPU panel: per device memory, utilization, temperature and power, plus the host."""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from tui.domain.telemetry import GpuDevice, GpuSample, HostSample, SourceStatus
from tui.ui.format import NA, bar, gib, gib0, na


def _short_name(name: str) -> str:
    return name.removeprefix("NVIDIA ").strip()


class GpuPanel(Widget):
    """Renders the latest :class:`GpuSample` and :class:`HostSample` (``None``: N/A)."""

    sample: reactive[GpuSample | None] = reactive(None, layout=True)
    host: reactive[HostSample | None] = reactive(None)

    def render(self) -> Content:
        """The panel's lines for the current width."""
        width = max(self.size.width, 10)
        lines: list[Content] = []
        sample = self.sample
        if sample is None:
            lines.append(Content.styled("waiting for the first sample", "$text-muted"))
        elif sample.status is not SourceStatus.OK or not sample.devices:
            reason = sample.message or ("no GPU found" if not sample.devices else "")
            lines.append(Content.styled(f"{sample.status.value}: {reason}", "$warning"))
            lines.append(Content.styled(f"source {sample.source}", "$text-muted"))
        else:
            compact = len(sample.devices) > 1
            for device in sample.devices:
                lines.extend(self._device_lines(device, width, compact))
        host = self.host
        if host is not None:
            lines.append(Content.styled(self._host_line(host, width), "$text-muted"))
        return Content("\n").join(lines)

    @staticmethod
    def _device_lines(device: GpuDevice, width: int, compact: bool) -> list[Content]:
        fraction = None
        if device.memory_used is not None and device.memory_total:
            fraction = device.memory_used / device.memory_total
        memory = f"{gib(device.memory_used)}/{gib(device.memory_total)} GiB"
        util = na(device.utilization, ".0f", "%")
        temp = na(device.temperature_c, ".0f", "°C")
        power = na(device.power_w, ".0f", "W")
        if compact:  # several GPUs: one line each
            text = f"{device.index} {memory} {util} {temp} {power}"
            return [Content(text)]
        gauge = bar(fraction, max(4, width - len(memory) - 1))
        style = "$error" if fraction is not None and fraction > 0.97 else "$accent"
        return [
            Content.assemble((f"{device.index} ", "bold"), _short_name(device.name)),
            Content.assemble((gauge, style), " ", memory),
            Content(f"util {util}  {temp}  {power}"),
        ]

    @staticmethod
    def _host_line(host: HostSample, width: int) -> str:
        if host.cpu_percent is None and host.memory_total is None:
            return f"host {NA}"
        line = f"cpu {na(host.cpu_percent, '.0f', '%')} ram {gib0(host.memory_used)}/"
        line += f"{gib0(host.memory_total)}G"
        # Add what fits the width: the server's memory, then the "host" label.
        if host.server_rss is not None and len(line) + 9 <= width:
            line += f" srv {gib(host.server_rss)}G"
        return f"host {line}" if len(line) + 5 <= width else line
