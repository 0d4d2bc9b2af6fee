"""Waiting on what happened, never on how fast: events, conditions, processes.

Every wait has a generous cap that only a hang reaches; the cap turns a hang into a
failure that says what was awaited.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from tui.domain.events import LogLine, ServerEvent, StageReached

E = TypeVar("E")
CAP_S = 60.0


async def until(done: Callable[[], bool], what: str, timeout: float = CAP_S) -> None:
    """Wait until ``done()`` holds (checked every 20 ms); fail naming ``what`` at the cap."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():
        if loop.time() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        await asyncio.sleep(0.02)


def until_blocking(
    done: Callable[[], object], what: str | Callable[[], str], timeout: float = CAP_S
) -> None:
    """:func:`until` for a test that is not async (a subprocess, tmux): checked every 0.1 s,
    a check that raises counts as not yet; fail naming ``what`` (or what it returns, e.g.
    the screen) at the cap."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if done():
                return
        time.sleep(0.1)
    said = what() if callable(what) else what
    raise AssertionError(f"gave up waiting for {said}")


LETTER_KEYS_ACT = "r Restart"
"""In the console's key bar while letter keys act (a form field eats them: the bar drops
them while one has focus)."""


def tmux_leave_field(tmux: Sequence[str], target: str, screen: Callable[[], str]) -> None:
    """Make the console in tmux pane ``target`` take letter keys: when a form field has
    focus, send Esc and wait until the key bar shows the letter keys again. The Esc is then
    read alone (the next key cannot arrive in the same read and be taken for alt+key), and
    no Esc is sent when none is needed."""
    if LETTER_KEYS_ACT in screen():
        return
    subprocess.run([*tmux, "send-keys", "-t", target, "Escape"], check=True, timeout=30)
    until_blocking(
        lambda: LETTER_KEYS_ACT in screen(), lambda: f"Esc to leave the field: {screen()}"
    )


class Recorder:
    """An event sink that keeps every event and wakes whoever waits for one."""

    def __init__(self) -> None:
        self.events: list[ServerEvent] = []
        self._changed = asyncio.Event()

    def __call__(self, event: ServerEvent) -> None:
        self.events.append(event)
        self._changed.set()

    def of(self, kind: type[E]) -> list[E]:
        """The events of type ``kind``, in order."""
        return [e for e in self.events if isinstance(e, kind)]

    def kinds(self) -> list[str]:
        """Event type names without the per-line noise."""
        return [type(e).__name__ for e in self.events if not isinstance(e, LogLine | StageReached)]

    def lines(self) -> list[str]:
        """The text of every ``LogLine``."""
        return [e.text for e in self.of(LogLine)]

    def pids(self, label: str) -> list[int]:
        """Pids the fake server printed as ``FAKE <label> pid=N``."""
        found = []
        for line in self.lines():
            m = re.fullmatch(rf"FAKE {label} pid=(\d+)", line)
            if m:
                found.append(int(m.group(1)))
        return found

    async def wait(self, done: Callable[[], bool], what: str, timeout: float = CAP_S) -> None:
        """Wait until ``done()`` holds, checked at each new event."""
        try:
            async with asyncio.timeout(timeout):
                while not done():
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError as exc:
            raise AssertionError(f"gave up waiting for {what}; events: {self.kinds()}") from exc

    async def wait_for(self, kind: type[E], timeout: float = CAP_S) -> E:
        """The first event of type ``kind``, waiting for it if need be."""
        await self.wait(lambda: bool(self.of(kind)), f"a {kind.__name__} event", timeout)
        return self.of(kind)[0]

    async def wait_line(self, pattern: str, timeout: float = CAP_S) -> str:
        """The first log line matching ``pattern`` (a regular expression)."""
        rx = re.compile(pattern)

        def found() -> bool:
            return any(rx.search(line) for line in self.lines())

        await self.wait(found, f"a log line matching {pattern!r}", timeout)
        return next(line for line in self.lines() if rx.search(line))
