"""What ``vtc top`` prints: one report of a server's state, as JSON or one text line.

Built from the same samples the console's panels show (pure: no I/O). ``state`` is the
metrics source's freshness (``tui.domain.freshness``): ``ok``, ``stale`` (no new reading
for two intervals) or ``down`` (with the reason). The values are those of the newest good
reading, whose age is ``data_age_s``; ``null`` is "not available", never a made-up zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from tui.domain.advice import Advice
from tui.domain.freshness import Freshness, freshness
from tui.domain.latency_text import LATENCY_LABELS, latency_text
from tui.domain.quantiles import LATENCY_FIELDS
from tui.domain.telemetry import (
    GpuSample,
    LatencyQuantiles,
    ServerLatency,
    ServerMetrics,
    SourceStatus,
)

GIB = 2**30


class GpuDeviceReport(BaseModel):
    """One GPU in the report."""

    index: int
    name: str
    uuid: str | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    utilization_pct: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None


class GpuReport(BaseModel):
    """The GPUs as their source sees them (``state`` and ``reason`` as for the server)."""

    state: SourceStatus
    source: str = ""
    reason: str = ""
    wsl: bool = False
    devices: list[GpuDeviceReport] = Field(default_factory=list)


class AdviceReport(BaseModel):
    """One piece of advice: the flag(s) to set, in ``set``."""

    code: str
    severity: str
    message: str
    set: dict[str, Any] = Field(default_factory=dict)


class TopReport(BaseModel):
    """``vtc top --json``'s object."""

    url: str
    state: SourceStatus  # ok, stale or down (see top_state)
    reason: str = ""
    age_s: float | None = None  # of the newest reading, good or not
    data_age_s: float | None = None  # of the values below
    latency_window_s: float | None = None  # null: since the server started
    latency_ms: dict[str, LatencyQuantiles | None] = Field(
        default_factory=lambda: dict.fromkeys(LATENCY_FIELDS)
    )
    kv_cache_usage: float | None = None
    num_running: float | None = None
    num_waiting: float | None = None
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    prefix_cache_hit_rate: float | None = None
    preemptions_total: float | None = None
    requests_success_total: float | None = None
    gpus: GpuReport
    advice: list[AdviceReport] = Field(default_factory=list)

    def to_json_dict(self) -> dict[str, Any]:
        """Plain JSON (non-finite floats as null)."""
        return _finite(self.model_dump(mode="json"))


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def top_state(fresh: Freshness) -> SourceStatus:
    """``ok``/``stale``/``down``: an unavailable source reads as down (with its reason)."""
    if fresh.state is SourceStatus.OK:
        return SourceStatus.OK
    if fresh.state is SourceStatus.STALE and fresh.age_s is not None:
        return SourceStatus.STALE
    return SourceStatus.DOWN


def gpu_report(sample: GpuSample | None, now: float, interval_s: float) -> GpuReport:
    """The GPU part of the report."""
    fresh = freshness(sample, now, interval_s)
    if sample is None:
        return GpuReport(state=top_state(fresh), reason=fresh.reason)
    devices = [
        GpuDeviceReport(
            index=d.index,
            name=d.name,
            uuid=d.uuid,
            memory_used_bytes=d.memory_used,
            memory_total_bytes=d.memory_total,
            utilization_pct=d.utilization,
            temperature_c=d.temperature_c,
            power_w=d.power_w,
        )
        for d in sample.devices
    ]
    return GpuReport(
        state=top_state(fresh),
        source=sample.source,
        reason=fresh.reason or (sample.message if sample.status is not SourceStatus.OK else ""),
        wsl=sample.wsl,
        devices=devices,
    )


def build_report(
    url: str,
    *,
    latest: ServerMetrics | None,
    good: ServerMetrics | None,
    latency: ServerLatency | None,
    gpu: GpuSample | None,
    now: float,
    interval_s: float,
    advice: Sequence[Advice] = (),
    no_answer: str = "",
) -> TopReport:
    """The report at ``now`` from the newest reading ``latest`` and the newest good one.

    ``no_answer``: the reason to give when nothing was read at all (``vtc top --once`` at
    its deadline).
    """
    fresh = freshness(latest, now, interval_s)
    state, reason = top_state(fresh), fresh.reason
    if latest is None and no_answer:
        reason = no_answer
    elif latest is not None and latest.status is SourceStatus.OK and latest.message:
        state, reason = SourceStatus.DOWN, latest.message  # a page without vllm: metrics
    values: dict[str, Any] = {}
    if good is not None:
        values = {
            "data_age_s": max(0.0, now - good.t),
            "kv_cache_usage": good.kv_cache_usage,
            "num_running": good.num_running,
            "num_waiting": good.num_waiting,
            "prompt_tokens_per_s": good.prompt_tokens_per_s,
            "generation_tokens_per_s": good.generation_tokens_per_s,
            "prefix_cache_hit_rate": good.prefix_cache_hit_rate,
            "preemptions_total": good.preemptions_total,
            "requests_success_total": good.requests_success_total,
        }
    if latency is not None:
        values["latency_window_s"] = latency.window_s
        values["latency_ms"] = {name: getattr(latency, name) for name in LATENCY_FIELDS}
    return TopReport(
        url=url,
        state=state,
        reason=reason,
        age_s=fresh.age_s,
        gpus=gpu_report(gpu, now, interval_s),
        advice=[
            AdviceReport(
                code=a.code, severity=a.severity, message=a.message, set=a.fix.set if a.fix else {}
            )
            for a in advice
        ],
        **values,
    )


def _num(value: float | None, fmt: str = ".0f", scale: float = 1.0) -> str:
    return "-" if value is None or not math.isfinite(value) else format(value * scale, fmt)


def text_line(report: TopReport) -> str:
    """One line for a terminal: state, queue, KV, rates, the latency lines as the console's
    Metrics panel reads them (one rule: :func:`tui.domain.latency_text.latency_text`, a
    quantile its histogram cannot place shown as its bound, ``<300 ms``), GPUs."""
    head = report.state.value if not report.reason else f"{report.state.value} ({report.reason})"
    parts = [
        head,
        f"run {_num(report.num_running)} wait {_num(report.num_waiting)}",
        f"kv {_num(report.kv_cache_usage, '.0f', 100)}%",
        f"tok/s in {_num(report.prompt_tokens_per_s)} out {_num(report.generation_tokens_per_s)}",
        f"hit {_num(report.prefix_cache_hit_rate, '.0f', 100)}%",
        *(latency_text(label, report.latency_ms.get(name)) for name, label in LATENCY_LABELS),
    ]
    for d in report.gpus.devices:
        used, total = d.memory_used_bytes, d.memory_total_bytes
        mem = f"{_num(used, '.1f', 1 / GIB)}/{_num(total, '.1f', 1 / GIB)}GiB"
        parts.append(f"gpu{d.index} {mem} {_num(d.utilization_pct)}%")
    if not report.gpus.devices and report.gpus.reason:
        parts.append(f"gpu: {report.gpus.reason}")
    return "  ".join(parts)
