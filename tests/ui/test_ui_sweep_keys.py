"""The sweep screen's keys at 80x24, its wording without SLOs, and its closing line against
the board's baseline (issue 39, item 4)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from test_ui_sweep import open_sweep, runs, status, trial
from textual.widgets import Input, Select
from ui_fakes import FakeSession

from tui.domain.sweep import SweepState
from tui.ui.app import create_app
from tui.ui.screens.sweep import SweepScreen
from tui.ui.widgets.sweep_status import SweepStatusLine, best_text
from tui.ui.widgets.sweep_trials import trial_row

SIZE = (80, 24)


def _shown(screen: SweepScreen) -> set[tuple[str, str]]:
    """What the key bar offers: (key as shown, label) of the enabled, shown bindings, one
    key per action as Textual's footer shows them (a letter a focused field eats dropped)."""
    by_action: dict[str, tuple[str, str]] = {}
    for key, active in screen.active_bindings.items():
        binding = active.binding
        if not (binding.show and active.enabled):
            continue
        if isinstance(screen.focused, Input) and len(key) == 1:
            continue  # typed into the field
        display = binding.key_display or key
        by_action.setdefault(binding.action, (display, binding.description))
    return set(by_action.values())


async def test_g_starts_at_once_and_in_a_text_field_f2_does_and_esc_leaves_it() -> None:
    session = FakeSession(runs=runs())
    app = create_app(session, clock=None, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sweep(pilot)
        assert isinstance(app.focused, Select)  # where letter keys act
        assert _shown(screen) >= {("g", "Start"), ("Esc", "Close")}
        field = screen.query_one("#sweep-pvalues-0", Input)
        field.focus()
        await pilot.pause()
        shown = _shown(screen)  # in a text field: the F-key, and Esc leaves it
        assert {("F2", "Start"), ("Esc", "Leave")} <= shown and ("Esc", "Close") not in shown
        await pilot.press("escape")  # leaves the field, the screen stays
        await pilot.pause()
        assert isinstance(app.screen, SweepScreen) and isinstance(app.focused, Select)
        field.focus()
        await pilot.press("f2")  # in a text field: F2 starts
        await pilot.pause()
        assert session.sweeps is not None and len(session.sweeps.started) == 1
        assert field.value == "64, 128, 256"  # nothing typed into it


async def test_g_from_the_first_focus_starts_the_sweep() -> None:
    session = FakeSession(runs=runs())
    app = create_app(session, clock=None, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await open_sweep(pilot)
        await pilot.press("g")
        await pilot.pause()
        assert session.sweeps is not None and len(session.sweeps.started) == 1


def test_no_slo_wording_without_slos() -> None:
    t1 = trial(1, 2, 64, 420.0)
    waiting = replace(status(SweepState.RUNNING, [], None), slo="")
    assert best_text(waiting) == "best: no trial measured yet"
    found = replace(status(SweepState.RUNNING, [t1], t1), slo="")
    assert "SLO" not in best_text(found) and best_text(found).startswith("best 420.0 tok/s ·")
    assert trial_row(t1, slos=False)[4] == "measured" and trial_row(t1)[4] == "met"
    bounded = status(SweepState.RUNNING, [], None)
    assert best_text(bounded) == "best: none met the SLOs yet (p99_itl_ms <= 200)"


async def test_an_ended_sweep_compares_its_best_with_the_boards_baseline() -> None:
    session = FakeSession(runs=runs())  # #1 the baseline at 300 tok/s
    app = create_app(session, clock=None, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sweep(pilot)
        low = trial(1, 2, 64, 279.0)
        assert session.sweeps is not None
        session.sweeps.publish(status(SweepState.RUNNING, [low], low))
        await pilot.pause()
        assert "baseline" not in str(screen.query_one(SweepStatusLine).render())
        session.sweeps.publish(status(SweepState.DONE, [low], low))
        await pilot.pause()
        head = str(screen.query_one(SweepStatusLine).render())
        assert "best 279.0 tok/s, 7.0% below the baseline #1" in head
        close = trial(1, 2, 64, 303.0)  # +1%: inside the noise band
        session.sweeps.publish(status(SweepState.DONE, [close], close))
        await pilot.pause()
        head = str(screen.query_one(SweepStatusLine).render())
        assert "within noise of the baseline #1 (+1.0%)" in head


def test_sweep_screen_without_slos_snapshot_80x24(snap_compare: Any) -> None:
    session = FakeSession(runs=runs())
    assert session.sweeps is not None
    t1, t2 = trial(1, 2, 64, 420.0), trial(2, 3, 128, 520.0)
    session.sweeps.status = replace(status(SweepState.DONE, [t1, t2], t2), slo="")

    async def run_before(pilot: Any) -> None:
        await pilot.press("w")
        await pilot.pause()

    assert snap_compare(
        create_app(session, clock=None, autostart=False), terminal_size=SIZE, run_before=run_before
    )


def test_sweep_screen_with_a_text_field_focused_snapshot_80x24(snap_compare: Any) -> None:
    """A text field focused: the key bar lists F2 Start and Esc Leave."""
    session = FakeSession(runs=runs())

    async def run_before(pilot: Any) -> None:
        await pilot.press("w")
        await pilot.pause()
        field = pilot.app.screen.query_one("#sweep-pvalues-0", Input)
        field.cursor_blink = False  # a blink phase is not the scene
        field.focus()
        await pilot.pause()

    assert snap_compare(
        create_app(session, clock=None, autostart=False), terminal_size=SIZE, run_before=run_before
    )
