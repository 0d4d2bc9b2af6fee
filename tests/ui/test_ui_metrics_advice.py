"""The Metrics panel's advice at 80x24 (issue 17): it fits or wraps by meaning, never cut
with an ellipsis (``a: enable_prefix_cachin…``); attached, where ``a`` is not offered,
neither the panel, the history screen, the help nor the key bar advertise it."""

from __future__ import annotations

import pytest
from painted import painted
from textual.pilot import Pilot
from ui_fakes import FakeSession, board_runs, server_metrics

from tui.domain.advice import Advice
from tui.domain.diagnosis import Fix
from tui.domain.events import ServerState, Unanswered
from tui.domain.freshness import Freshness
from tui.domain.telemetry import SourceStatus
from tui.session.port import TelemetryStatus
from tui.ui.app import VtcApp, create_app
from tui.ui.screens.help import HelpScreen
from tui.ui.screens.history import HistoryScreen
from tui.ui.widgets.metrics_panel import MetricsPanel
from tui.ui.widgets.run_card import RunCard

OK_NOW = Freshness(SourceStatus.OK, 0.4)
GPU_HEADROOM = Advice(
    "gpu_memory_headroom",
    "info",
    "KV cache peaked at 99% while 20% of the GPU's memory is free",
    Fix(title="more KV memory", set={"gpu_memory_utilization": 0.95}),
)
PREFIX = Advice(
    "prefix_cache_low",
    "info",
    "prefix caching is on but 0.4% of 9,000 prompt tokens hit",
    Fix(title="no prefix caching", set={"enable_prefix_caching": False}),
)
PREEMPT = Advice(
    "preemptions",
    "warn",
    "30 preemptions in the last 59 s: running requests are evicted",
    Fix(title="max_num_seqs 12", set={"max_num_seqs": 12}),
)


async def show(pilot: Pilot[None], session: FakeSession, *advice: Advice) -> list[str]:
    session.emit(server_metrics())
    session.emit(TelemetryStatus(gpu=OK_NOW, metrics=OK_NOW, advice=advice))
    await pilot.pause()
    return painted(pilot.app.query_one(MetricsPanel))


@pytest.mark.parametrize(
    ("advice", "reads"),
    [
        ((GPU_HEADROOM,), "a: gpu_mem_util=0.95"),
        ((PREFIX,), "a: en_pfx_cache=off"),
        ((PREEMPT, GPU_HEADROOM), "a: max_num_seqs=12 (+1)"),
    ],
    ids=["gpu-memory", "prefix-caching", "two"],
)
async def test_the_advice_fits_the_panel_at_80x24(advice: tuple[Advice, ...], reads: str) -> None:
    session = FakeSession(state=ServerState.READY)
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        lines = await show(pilot, session, *advice)
        body = "\n".join(lines)
        assert "…" not in body, body
        assert any(line.strip() == reads for line in lines), body


async def test_a_wider_panel_shows_the_full_flag_name_and_why() -> None:
    session = FakeSession(state=ServerState.READY)
    app = create_app(session, clock=None)
    async with app.run_test(size=(160, 40)) as pilot:
        body = "\n".join(await show(pilot, session, PREEMPT))
        assert "a: max_num_seqs=12 · preempting" in body and "…" not in body


def offered_keys(app: VtcApp) -> set[str]:
    return {b.binding.action for b in app.screen.active_bindings.values()}


async def test_attached_nothing_advertises_the_advice_key() -> None:
    session = FakeSession(state=ServerState.READY, can_restart=False)
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        lines = await show(pilot, session, PREEMPT)
        body = "\n".join(lines)
        assert "try max_num_seqs=12" in body and "a:" not in body and "…" not in body
        assert "apply_advice" not in offered_keys(app)
        await pilot.press("h")
        await pilot.pause()
        assert isinstance(app.screen, HistoryScreen)
        advice = str(app.screen.query_one("#history-advice").render())
        assert "try max_num_seqs=12" in advice and "a puts" not in advice
        await pilot.press("escape")
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        keys = [row for row, _ in app.screen.rows]
        assert "a / F3" not in keys and "r / F5" not in keys and "s / F9" not in keys
        assert "b / F6" in keys and "h / F2" in keys
        assert not any("'a: ...'" in text for _, text in app.screen.rows)


async def test_attached_a_hung_server_offers_no_s() -> None:
    session = FakeSession(state=ServerState.READY, can_restart=False)
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        session.emit(Unanswered(silent_s=12.0, reason="no /health answer in 3 s"))
        await pilot.pause()
        text = "\n".join(painted(app.main_screen.server_panel.query_one("#server-status")))
        assert "NOT RESPONDING" in text and "s stops it" not in text


async def test_attached_a_failed_run_from_the_history_offers_no_f() -> None:
    """A failed start kept from an earlier session: attached, its card names its fixes but
    never says "f applies fix 1" (``f`` is not offered there)."""
    for can_restart in (True, False):
        session = FakeSession(runs=board_runs()[:2], can_restart=can_restart)
        app = create_app(session, clock=None, autostart=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            failed = next(c for c in app.query(RunCard) if c.record.label == "#2")
            card = str(failed.query_one(".card-body").render())
            assert "fix 1:" in card
            assert ("f applies fix 1" in card) is can_restart, card
