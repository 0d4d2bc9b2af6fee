"""A lone Esc reaches the console when ESCDELAY is over, not when the input thread next
wakes (issue 39 item 6): Textual's Linux driver ticks its parser only after ``select(0.1)``
returns, so with nothing typed after it an Esc waited 100 ms, whatever ESCDELAY said.
Structural: the waits the input thread asks for, and which wait delivered the key."""

from __future__ import annotations

import asyncio
import os
import selectors
import threading
from typing import Any

import pytest
from textual import constants
from textual.events import Key
from textual.message import Message
from ui_fakes import board_session

from tui.ui import prompt_escape
from tui.ui.app import create_app
from tui.ui.prompt_escape import IDLE_WAIT_S, MARGIN_S, PromptEscapeDriver, next_wait


class Recorded(PromptEscapeDriver):
    """The driver, its keys recorded with how many waits had been asked for by then."""

    waits: list[float]
    keys: list[tuple[str, int]]
    seen: threading.Event

    def process_message(self, message: Message) -> None:
        if isinstance(message, Key):
            self.keys.append((message.key, len(self.waits)))
            self.seen.set()


async def run_thread(data: bytes, monkeypatch: pytest.MonkeyPatch) -> Recorded:
    """Feed ``data`` to the driver's input thread through a pipe; return once a key came."""
    read_end, write_end = os.pipe()
    driver = Recorded(create_app(board_session(), clock=None))
    driver.fileno = read_end
    driver.waits, driver.keys, driver.seen = [], [], threading.Event()

    class Counting(selectors.SelectSelector):
        def select(self, timeout: float | None = None) -> Any:
            driver.waits.append(timeout if timeout is not None else -1.0)
            return super().select(timeout)

    monkeypatch.setattr(prompt_escape, "Selector", Counting)
    thread = threading.Thread(target=driver.run_input_thread, daemon=True)
    thread.start()
    try:
        os.write(write_end, data)
        assert await asyncio.to_thread(driver.seen.wait, 10.0), "no key came"
    finally:
        driver.exit_event.set()
        thread.join(5.0)
        os.close(write_end)
        os.close(read_end)
    return driver


async def test_a_lone_escape_is_delivered_by_a_wait_as_short_as_escdelay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    driver = await run_thread(b"\x1b", monkeypatch)
    key, after = driver.keys[0]
    assert key == "escape"
    # the wait that read the Esc, then one no longer than ESCDELAY that delivered it
    assert after == 2, driver.waits
    assert driver.waits[0] == IDLE_WAIT_S
    assert driver.waits[1] == next_wait(True) == constants.ESCAPE_DELAY + MARGIN_S


async def test_other_keys_keep_textual_idle_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = await run_thread(b"a", monkeypatch)
    assert driver.keys[0] == ("a", 1)  # on the read itself
    assert set(driver.waits) == {IDLE_WAIT_S}  # no short wait: nothing was pending


def test_the_wait_is_short_only_while_an_escape_is_pending() -> None:
    assert next_wait(False) == IDLE_WAIT_S
    # the console's ESCDELAY (25 ms, tui.ui) where textual is first imported by it
    assert float(os.environ["ESCDELAY"]) / 1000 + MARGIN_S < IDLE_WAIT_S


def test_the_console_runs_on_the_prompt_escape_driver() -> None:
    app = create_app(board_session(), clock=None)
    if os.name == "posix":
        assert app.driver_class is PromptEscapeDriver


def test_the_copied_loop_is_the_installed_textuals() -> None:
    """The driver copies Textual's input loop: a Textual whose loop changed fails here (the
    copy must be reviewed against it, then COPIED_LOOP_SHA256 renewed), and until then the
    console runs Textual's own driver (below)."""
    import textual

    assert prompt_escape.matches_textual(), (
        f"textual {textual.__version__}: LinuxDriver.run_input_thread is not the loop "
        "tui/ui/prompt_escape.py copies; review the copy against it"
    )


def test_a_changed_textual_loop_runs_textuals_own_driver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from textual.drivers.linux_driver import LinuxDriver

    prompt_escape.matches_textual.cache_clear()
    monkeypatch.setattr(prompt_escape, "COPIED_LOOP_SHA256", "0" * 64)
    try:
        app = create_app(board_session(), clock=None)
        if os.name == "posix":
            assert app.driver_class is LinuxDriver
    finally:
        prompt_escape.matches_textual.cache_clear()
