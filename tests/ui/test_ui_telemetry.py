"""Pilot tests of the telemetry panels: ages, stale and down marks, server-side latency
lines, WSL2 labels (through the fake ``pynvml``), many GPUs, advice applied with ``a``,
and the history screen."""

from __future__ import annotations

import dataclasses

import pynvml
from fakes.pynvml import FakeNvml, h100, wsl_device
from textual.content import Content
from textual.pilot import Pilot
from ui_fakes import FakeSession, gpu_sample, host_sample, server_metrics

from tui.domain.advice import Advice
from tui.domain.diagnosis import Fix
from tui.domain.events import ServerState
from tui.domain.freshness import Freshness
from tui.domain.telemetry import (
    GpuSample,
    HostSample,
    LatencyQuantiles,
    ServerLatency,
    ServerMetrics,
    SimInfo,
    SourceStatus,
)
from tui.session.port import TelemetryStatus
from tui.telemetry.nvml import NvmlGpuSource
from tui.ui.app import VtcApp, create_app
from tui.ui.screens.history import HistoryScreen
from tui.ui.widgets.history_chart import HistoryChart

OK_NOW = Freshness(SourceStatus.OK, 0.4)


def text(app: VtcApp, selector: str) -> str:
    """The rendered text of one widget."""
    return str(app.query_one(selector).render())


def title(app: VtcApp, selector: str) -> str:
    """A panel's border title, as plain text."""
    found = app.query_one(selector).border_title
    return "" if found is None else Content.from_markup(found).plain


def latency() -> ServerLatency:
    """The server's last minute: TTFT, ITL, E2E and queue percentiles in ms."""

    def q(p50: float, p90: float, p99: float) -> LatencyQuantiles:
        return LatencyQuantiles(p50=p50, p90=p90, p99=p99, count=40)

    return ServerLatency(
        ttft=q(120, 180, 340), itl=q(22, 30, 48), e2el=q(2100, 3000, 4200), queue=q(3, 8, 15)
    )


def busy_metrics() -> ServerMetrics:
    """A busy server's page with its latency window."""
    return dataclasses.replace(server_metrics(), latency=latency())


async def feed(pilot: Pilot[None], session: FakeSession, *events: object) -> None:
    for event in events:
        session.emit(event)  # type: ignore[arg-type]
    await pilot.pause()


async def test_stale_and_down_marks_and_the_age_of_the_data() -> None:
    session = FakeSession(state=ServerState.READY)
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await feed(pilot, session, gpu_sample(), host_sample(), server_metrics())
        await feed(pilot, session, TelemetryStatus(gpu=OK_NOW, metrics=OK_NOW, host=OK_NOW))
        assert title(app, "#gpu") == "GPU · 0.4s" and title(app, "#metrics") == "Metrics · 0.4s"

        stale = Freshness(SourceStatus.STALE, 5.2, "no new reading for 5.2 s")
        down = Freshness(SourceStatus.DOWN, 3.0, "connection refused")
        await feed(pilot, session, TelemetryStatus(gpu=stale, metrics=down))
        assert title(app, "#gpu") == "GPU · STALE 5.2s"
        assert title(app, "#metrics") == "Metrics · DOWN"
        assert "9.1/10.0 GiB" in text(app, "#gpu")  # the last reading, marked, not hidden

        page_down = ServerMetrics(t=1.0, status=SourceStatus.DOWN, message="connection refused")
        await feed(pilot, session, page_down)
        assert "down: connection refused" in text(app, "#metrics")
        assert "KV" not in text(app, "#metrics")  # no numbers of a page that was not read


async def test_server_side_latency_lines_fit_80_and_120_columns() -> None:
    session = FakeSession(state=ServerState.READY)
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await feed(pilot, session, busy_metrics())
        narrow = text(app, "#metrics")
        assert "KV 43.1% run 12 wait 0" in narrow and "TTFT p50/99 120/340 ms" in narrow
        assert len(narrow.splitlines()) <= 4  # 80x24: four lines, most important first
    app = create_app(session, clock=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(pilot, session, busy_metrics())
        wide = text(app, "#metrics")
        assert "TTFT p50/p90/p99 120/180/340 ms" in wide
        assert "ITL p50/p90/p99 22/30/48 ms" in wide
        assert "E2E p50/p90/p99 2.1/3.0/4.2 s" in wide
        idle = ServerLatency(ttft=LatencyQuantiles(count=0), itl=None)
        quiet = dataclasses.replace(busy_metrics(), latency=idle)
        await feed(pilot, session, quiet)
        assert "TTFT idle" in text(app, "#metrics")  # no request in the server's window


async def test_wsl2_labels_and_nvml_blocked_access_through_fake_pynvml() -> None:
    wsl = NvmlGpuSource(FakeNvml([wsl_device()]), wsl=True).sample()
    host = HostSample(
        t=1.0,
        cpu_percent=9.0,
        memory_used=4 * 2**30,
        memory_total=16 * 2**30,
        server_rss=2**30,
        server_pids=(4242, 4243),
        label="box (WSL2)",
    )
    session = FakeSession(state=ServerState.READY)
    app = create_app(session, clock=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(pilot, session, wsl, host)
        await feed(pilot, session, TelemetryStatus(gpu=OK_NOW, server_gpus=frozenset({0})))
        assert title(app, "#gpu").startswith("GPU (WSL2)")
        gpu = text(app, "#gpu")
        assert "srv N/A (WDDM)" in gpu and "20.0/24.0 GiB" in gpu
        assert "box (WSL2)" in gpu  # the host, labelled

        blocked = FakeNvml([h100()], init_error=pynvml.NVMLError_OperatingSystem())
        await feed(pilot, session, NvmlGpuSource(blocked, wsl=True).sample())
        gpu = " ".join(text(app, "#gpu").split())  # wrapped over the panel's lines
        assert "WSL2: GPU access blocked by the operating system" in gpu
        assert "wsl --update" in gpu  # what to do, in full (wrapped, not cut)


def four_gpus(server: frozenset[int]) -> tuple[GpuSample, TelemetryStatus]:
    sample = NvmlGpuSource(FakeNvml([h100(), h100(), h100(), h100(procs=[])]), wsl=False).sample()
    return sample, TelemetryStatus(gpu=OK_NOW, server_gpus=server)


async def test_many_gpus_one_row_each_the_servers_marked() -> None:
    sample, status = four_gpus(frozenset({0, 1}))
    session = FakeSession(state=ServerState.READY)
    app = create_app(session, clock=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(pilot, session, sample, host_sample(), status)
        rows = text(app, "#gpu").splitlines()
        assert [r.split()[0] for r in rows[:4]] == ["0*", "1*", "2", "3"]
        assert "70.0/80G" in rows[0] and "93%" in rows[0]
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:  # three rows of room: the rest counted
        await feed(pilot, session, sample, host_sample(), status)
        rows = text(app, "#gpu").splitlines()
        assert rows[0].startswith("0* 70.0/80G") and rows[1].startswith("1* ")
        assert rows[2] == "+2 more GPUs (h)" and rows[3].startswith("cpu")
        await pilot.press("h")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        every = str(screen.query_one("#history-gpus").render())
        assert "2 " in every and "3 " in every  # the history screen lists them all


async def test_advice_shows_while_it_holds_and_a_puts_it_into_the_form() -> None:
    session = FakeSession(state=ServerState.READY)
    app = create_app(session, clock=None)
    fix = Fix(title="max_num_seqs 12: a batch the KV cache holds", set={"max_num_seqs": 12})
    advice = Advice("preemptions", "warn", "9 preemptions in the last 60 s", fix)
    async with app.run_test(size=(80, 24)) as pilot:
        await feed(pilot, session, busy_metrics())
        await pilot.press("a")  # nothing holds: nothing changes
        await pilot.pause()
        assert app.main_screen.form.field("max_num_seqs").value != "12"
        await feed(pilot, session, TelemetryStatus(gpu=OK_NOW, metrics=OK_NOW, advice=(advice,)))
        assert "a: max_num_seqs=12" in text(app, "#metrics")
        await pilot.press("a")
        await pilot.pause()
        assert app.main_screen.form.field("max_num_seqs").value == "12"
        await pilot.press("r")
        await pilot.pause()
        await app.workers.wait_for_complete()
        assert session.restarted_with[-1].max_num_seqs == 12
        await feed(pilot, session, TelemetryStatus(gpu=OK_NOW, metrics=OK_NOW))
        assert "a: " not in text(app, "#metrics")  # it no longer holds: gone


async def test_the_history_screen_charts_the_last_minutes() -> None:
    session = FakeSession(state=ServerState.READY)
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        for i, kv in enumerate((0.1, 0.4, 0.9)):
            page = ServerMetrics(t=float(i), status=SourceStatus.OK, kv_cache_usage=kv)
            await feed(pilot, session, page)
        await pilot.press("h")
        await pilot.pause()
        chart = app.screen.query_one("#chart-kv_cache_usage", HistoryChart)
        assert chart.values == (0.1, 0.4, 0.9)
        drawn = str(chart.render())
        assert "now 90%" in drawn and "min 10%" in drawn and drawn.endswith("▂▄█")  # 0 at bottom
        assert "no readings yet" in str(app.screen.query_one("#chart-gpu_util").render())
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HistoryScreen)


async def test_the_header_says_when_a_simulators_time_is_scaled() -> None:
    session = FakeSession(state=ServerState.READY, mode_label="attached: http://127.0.0.1:8000")
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        sim = SimInfo("NVIDIA GeForce RTX 3080", 4.0)
        await feed(pilot, session, dataclasses.replace(server_metrics(), sim=sim))
        expected = "Server · attached: http://127.0.0.1:8000 · simulated RTX 3080 · 4x time"
        assert title(app, "#server") == expected
