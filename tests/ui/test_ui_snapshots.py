"""SVG snapshots of the main screen at 80x24 and 120x40, built with ``create_app``.

The scene is fixed data (``ui_fakes.populated_session``): a ready server with its log tail, one
GPU sample, /metrics, a load in progress, and a board holding a reference run, a failed
start with its diagnosis and a faster run with deltas. No clock runs (``clock=None``).
Regenerate with ``pytest tests/ui --snapshot-update`` and look at the report before keeping.
"""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot
from ui_fakes import gpu_sample, host_sample, load_progress, populated_session, server_metrics

from tui.ui.app import create_app
from tui.ui.widgets.run_card import RunCard


async def feed_telemetry(pilot: Pilot[Any]) -> None:
    """What the pollers and the load runner would have reported by now."""
    session = pilot.app.session
    session.emit(gpu_sample())
    session.emit(host_sample())
    session.emit(server_metrics())
    for i, tps in enumerate((300.0, 520.0, 610.0, 700.0, 690.0, 720.0)):
        session.emit(load_progress(10 * i, tps))
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_main_screen_snapshot(snap_compare: Any, size: tuple[int, int]) -> None:
    app = create_app(populated_session(), clock=None)
    assert snap_compare(app, terminal_size=size, run_before=feed_telemetry)


def test_invalid_field_and_failed_card_snapshot(snap_compare: Any) -> None:
    """80x24: an out-of-range value shows vLLM's words under its field; the board scrolled
    back to the failed start shows its diagnosis and fixes."""

    async def edit_and_scroll(pilot: Pilot[Any]) -> None:
        await feed_telemetry(pilot)
        screen = pilot.app.main_screen
        screen.form.field("gpu_memory_utilization").set_value("1.5")
        failed_card = list(screen.query(RunCard))[1]
        screen.board.scroll_to_widget(failed_card, animate=False)
        await pilot.pause()

    app = create_app(populated_session(), clock=None)
    assert snap_compare(app, terminal_size=(80, 24), run_before=edit_and_scroll)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_twin_line_snapshot(snap_compare: Any, size: tuple[int, int]) -> None:
    """The form's twin line (issue 20): what the edited flags would do, labelled predicted."""
    from ui_fakes import FakeTwin

    from tui.domain.prediction import ErrorSource, Prediction

    session = populated_session()
    prediction = Prediction(
        profile="gpu-box r3",
        error_pct=6.0,
        error_source=ErrorSource.VALIDATION,
        starts=True,
        kv_tokens=448928,
        output_throughput=2345.0,
        p99_ttft_ms=120.0,
        p99_e2el_ms=2100.0,
    )
    session.twin = FakeTwin(prediction)

    async def edit(pilot: Pilot[Any]) -> None:
        await feed_telemetry(pilot)
        pilot.app.main_screen.form.field("max_num_seqs").set_value("64")
        for _ in range(50):  # the prediction comes from a worker: wait for its line
            await pilot.pause(0.05)
            if session.twin is not None and session.twin.predicted:
                break
        await pilot.pause()

    app = create_app(session, clock=None)
    assert snap_compare(app, terminal_size=size, run_before=edit)
