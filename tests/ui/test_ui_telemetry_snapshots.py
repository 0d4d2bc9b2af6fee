"""SVG snapshots of the telemetry strip (GPU, Metrics with server-side latency and advice,
Load) at 80x24 and 120x40, and of the history screen.

Fixed data (``ui_fakes``): one GPU under load with its history, a busy server's /metrics
with its latency window, ages from a ``TelemetryStatus``, one piece of advice. No clock
runs. Regenerate with ``pytest tests/ui --snapshot-update`` and look at the report first.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from textual.pilot import Pilot
from ui_fakes import gpu_sample, host_sample, load_progress, populated_session, server_metrics

from tui.domain.advice import Advice
from tui.domain.diagnosis import Fix
from tui.domain.freshness import Freshness
from tui.domain.telemetry import LatencyQuantiles, ServerLatency, SourceStatus
from tui.session.port import TelemetryStatus
from tui.ui.app import create_app

KV = (0.12, 0.25, 0.41, 0.58, 0.77, 0.9, 0.97, 0.97, 0.96, 0.97)
UTIL = (20.0, 45.0, 80.0, 95.0, 97.0, 97.0, 98.0, 97.0, 96.0, 97.0)


def advice() -> Advice:
    fix = Fix(
        title="max_num_seqs 9: a batch the KV cache holds (peak was 12)", set={"max_num_seqs": 9}
    )
    return Advice("preemptions", "warn", "14 preemptions in the last 60 s", fix)


def window() -> ServerLatency:
    def q(p50: float, p90: float, p99: float) -> LatencyQuantiles:
        return LatencyQuantiles(p50=p50, p90=p90, p99=p99, count=64)

    return ServerLatency(
        ttft=q(118, 240, 330), itl=q(22, 31, 48), e2el=q(2900, 3800, 4400), queue=q(2, 40, 95)
    )


async def feed(pilot: Pilot[Any]) -> None:
    """Ten seconds of a load filling the KV cache, then the status of that moment."""
    session = pilot.app.session
    for i, (kv, util) in enumerate(zip(KV, UTIL, strict=True)):
        t = 100.0 + i
        gpu = gpu_sample()
        device = dataclasses.replace(gpu.devices[0], utilization=util)
        session.emit(dataclasses.replace(gpu, t=t, devices=(device,)))
        page = server_metrics()
        session.emit(
            dataclasses.replace(
                page,
                t=t,
                kv_cache_usage=kv,
                latency=window(),
                generation_tokens_per_s=70.0 * (i + 1),
            )
        )
    session.emit(host_sample())
    for i, tps in enumerate((300.0, 520.0, 610.0, 700.0, 690.0, 720.0)):
        session.emit(load_progress(10 * i, tps))
    ok = Freshness(SourceStatus.OK, 0.6)
    session.emit(
        TelemetryStatus(gpu=ok, metrics=ok, host=ok, server_gpus=frozenset({0}), advice=(advice(),))
    )
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_telemetry_strip_snapshot(snap_compare: Any, size: tuple[int, int]) -> None:
    app = create_app(populated_session(), clock=None)
    assert snap_compare(app, terminal_size=size, run_before=feed)


def test_history_screen_snapshot(snap_compare: Any) -> None:
    async def open_history(pilot: Pilot[Any]) -> None:
        await feed(pilot)
        await pilot.press("h")
        await pilot.pause()

    app = create_app(populated_session(), clock=None)
    assert snap_compare(app, terminal_size=(80, 24), run_before=open_history)
