"""The console app and its factory: the one way the CLI, the demo and the tests build it."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from textual.app import App, CSSPathType
from textual.binding import Binding, BindingType
from textual.command import CommandPalette, Provider
from textual.driver import Driver
from textual.notifications import SeverityLevel

from tui.domain.errors import retry_line
from tui.domain.inert import inert
from tui.session.port import SessionEvent, SessionPort
from tui.ui.gc_pause import freeze_heap, thaw_heap
from tui.ui.keys import QUIT_HELP
from tui.ui.messages import SessionEventArrived
from tui.ui.pacer import LOAD_REFRESH_S, EventPacer

__all__ = ["LOAD_REFRESH_S", "VtcApp", "create_app", "exit_backstop"]

from tui.ui.palette import ConsoleCommands
from tui.ui.screen_keeper import open_screen
from tui.ui.screens.confirm_quit import ConfirmQuitScreen, what_quit_stops
from tui.ui.screens.main import Clock, MainScreen

STYLES = Path(__file__).parent / "styles"
HANGUP_EXIT_S = 60.0
"""After a hang-up the process ends within this long, whatever happens (a stop included)."""
DETACHED_EXIT_S = 3.0
"""Once detached after a hang-up, how long Textual gets to shut down before the process ends."""


def exit_backstop(seconds: float) -> threading.Timer:
    """End the process in ``seconds`` unless it has ended by then (a daemon timer).

    Needed after a hang-up: Textual's output thread dies on its first write to the hung-up
    terminal (EIO), its queue fills, and the app's shutdown then blocks forever writing the
    terminal-restore codes (Textual 8.2 ``LinuxDriver``), deaf to SIGTERM. The session has
    detached (or closed) by then, and nobody is left to see the screen.
    """
    timer = threading.Timer(seconds, os._exit, args=(0,))
    timer.daemon = True
    timer.start()
    return timer


ERROR_TIMEOUT = 6.0
"""Seconds an error's toast stays (the run's card or the form keeps it after)."""


class VtcApp(App[None]):
    """vtc, the vLLM tuning console: one screen over a :class:`SessionPort`.

    Session events are delivered on the app's loop by the session's ``subscribe`` callback,
    posted to the app as :class:`SessionEventArrived` messages (telemetry coalesces when the
    queue backs up) and routed by :meth:`MainScreen.apply` to the widgets.
    """

    TITLE = "vtc"
    SUB_TITLE = "vLLM tuning console"
    CSS_PATH: ClassVar[CSSPathType | None] = [STYLES / "app.tcss", STYLES / "help.tcss"]
    # ctrl+p: every flag by name and every command (tui.ui.palette); shown in the key bar.
    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = {ConsoleCommands}
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "quit", "Quit", tooltip=QUIT_HELP)]
    COMMAND_PALETTE_DISPLAY = "^p"  # Textual's own ctrl+p binding, at the key bar's right

    def __init__(
        self,
        session: SessionPort,
        *,
        clock: Clock | None = time.monotonic,
        autostart: bool = True,
        load_refresh_s: float | None = None,
    ) -> None:
        super().__init__()
        self.session = session
        self.pacer = (
            EventPacer(self._post, lambda s, f: self.set_timer(s, f), load_refresh_s)
            if load_refresh_s
            else None
        )
        self._clock = clock
        self._autostart = autostart
        self._quitting = False
        self._signals: list[int] = []
        self.frozen = 0  # objects kept out of the collector's full passes (gc_pause)
        self._signal_task: asyncio.Future[None] | None = None
        self.main_screen = MainScreen(session, clock=clock)

    NOTIFICATION_TIMEOUT: ClassVar[float] = 3.0
    """Seconds a toast stays (Textual's 5): it sits over the log tail, and a second one over
    the GPU/Metrics figures, for a moment only; errors stay longer (ERROR_TIMEOUT)."""

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every toast as plain text: its message often holds text from outside (an error
        body, a model id, a preset's name), shown as itself, escapes removed."""
        if timeout is None and severity == "error":
            timeout = ERROR_TIMEOUT
        super().notify(
            inert(message, newlines=True) if not markup else message,
            title=inert(title),
            severity=severity,
            timeout=timeout,
            markup=markup,
        )

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver for this platform; on Linux and macOS its Linux driver with a
        lone Esc delivered when ESCDELAY is over, not up to 100 ms later
        (:mod:`tui.ui.prompt_escape`)."""
        driver = super().get_driver_class()
        if driver.__name__ == "LinuxDriver" and driver.__module__ == "textual.drivers.linux_driver":
            # imports termios: not on Windows
            from tui.ui.prompt_escape import PromptEscapeDriver, matches_textual

            if matches_textual():  # else an upgraded Textual: its own loop, not a stale copy
                return PromptEscapeDriver
        return driver

    def get_default_screen(self) -> MainScreen:
        """The main screen is the app's base screen (the help modal goes on top)."""
        return self.main_screen

    def on_mount(self) -> None:
        """Subscribe to the session, then start it."""
        self.session.subscribe(self._on_session_event)
        if not self.is_headless:
            self._install_signal_handlers()
        if self._autostart:
            self.run_worker(self._start(), group="session", exit_on_error=False)

    def on_ready(self) -> None:
        """The first screen is drawn: its widgets leave the collector's full passes."""
        self.frozen = freeze_heap()

    def on_unmount(self) -> None:
        """Give the signals (and the frozen heap) back."""
        thaw_heap()
        loop = asyncio.get_running_loop()
        for sig in self._signals:
            loop.remove_signal_handler(sig)
        self._signals = []

    def _install_signal_handlers(self) -> None:
        # A dropped SSH session or a killed tmux pane sends SIGHUP: the console detaches,
        # leaving the server it started (its own session, so the hang-up never reaches it)
        # running for the next `vtc` to reattach to, or `vtc stop` to stop. SIGTERM is an
        # explicit request to end: it quits like q, stopping what this console started.
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGHUP, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self.on_signal, sig)
            except (NotImplementedError, RuntimeError, ValueError):  # not Unix, not main thread
                continue
            self._signals.append(sig)

    def on_signal(self, sig: int) -> None:
        """SIGHUP: detach (the server runs on), then exit. SIGTERM: quit as a confirmed q."""
        if sig == signal.SIGHUP:
            self.log.warning("hang-up: detaching, the server keeps running")
            if not self.is_headless:  # a real terminal, and it is gone
                exit_backstop(HANGUP_EXIT_S)
            self._signal_task = asyncio.ensure_future(self.detach())
        else:
            self.log.warning(f"signal {sig}: closing the session")
            self._signal_task = asyncio.ensure_future(self.quit_now())

    async def detach(self) -> None:
        """Leave the server running for the next ``vtc`` (the session says if it could), exit."""
        if self._quitting:
            return
        self._quitting = True
        try:
            await self.session.detach()
        except Exception as exc:  # still exit: the terminal is gone
            self.log.error(f"session detach failed: {exc!r}")
        if not self.is_headless:  # nothing left to do but restore a terminal that is gone
            exit_backstop(DETACHED_EXIT_S)
        self.exit()

    async def _start(self) -> None:
        try:
            await self.session.start()
        except Exception as exc:  # show it; the operator may still fix the form and press r
            text = retry_line(exc, "r")  # a busy history names the key that tries again
            self.notify(text, title="Session start failed", severity="error", timeout=15)
        for notice in self.session.info.notices:  # e.g. reattached, or a stale state file removed
            self.notify(notice, timeout=10)

    def _on_session_event(self, event: SessionEvent) -> None:
        # Called on the app's loop; the message queue keeps widget updates in order.
        if self.pacer is not None:
            self.pacer.push(event)  # while a load runs: one batch per refresh period
        else:
            self._post(event)

    def _post(self, event: SessionEvent) -> None:
        self.post_message(SessionEventArrived(event))

    def on_session_event_arrived(self, message: SessionEventArrived) -> None:
        """Hand the event to the main screen (unless the app is shutting down)."""
        # The session outlives the app (it is closed after, or while, the app goes away) and
        # keeps reporting; once shutdown has begun the panels may already be gone.
        if self.is_running:
            self.main_screen.apply(message.event)

    def action_command_palette(self) -> None:
        """ctrl+p: Textual's palette, opened as a passing screen (:mod:`tui.ui.screen_keeper`):
        closing it lays out nothing of the main screen (popped, Textual removed it, and the
        removal laid out the whole main screen: Esc after ctrl+p, ~270 ms at 80x24)."""
        if self.use_command_palette and not isinstance(self.screen, CommandPalette):
            # no id (Textual's "--command-palette"): the one closed last is still installed
            # when the next opens, and ids are unique; Textual tells it by its class
            open_screen(self, CommandPalette())

    async def action_quit(self) -> None:
        """``q``: quit at once when nothing runs; else ask first, naming what quitting stops
        (the server, a load, a sweep): one key confirms."""
        if self._quitting or isinstance(self.screen, ConfirmQuitScreen):
            return
        stops = what_quit_stops(self.session)
        if not stops:
            await self.quit_now()
            return

        async def decided(confirmed: bool | None) -> None:
            if confirmed:
                await self.quit_now()

        open_screen(self, ConfirmQuitScreen(stops), decided)

    async def quit_now(self) -> None:
        """Close the session (load, the server it started, pollers), then exit."""
        if self._quitting:
            return
        self._quitting = True
        self.notify("Stopping the load and the server this console started...")
        try:
            await self.session.close()
        except Exception as exc:  # still exit: the operator asked to quit
            self.log.error(f"session close failed: {exc!r}")
        self.exit()


def create_app(
    session: SessionPort,
    *,
    clock: Clock | None = time.monotonic,
    autostart: bool = True,
    load_refresh_s: float | None = None,
) -> VtcApp:
    """Build the console over ``session``.

    Args:
        session: the services (a ``tui.session.Session``, or a fake in tests).
        clock: monotonic seconds for the "since launch" counter; ``None`` freezes it (tests
            and snapshots stay deterministic).
        autostart: call ``session.start()`` once mounted (pollers, and the first server if
            the session's mode says so).
        load_refresh_s: while a load runs, session events reach the screen in one batch
            per this many seconds (the console ``vtc`` runs:
            :data:`~tui.ui.pacer.LOAD_REFRESH_S`); ``None``: at once (tests).
    """
    return VtcApp(session, clock=clock, autostart=autostart, load_refresh_s=load_refresh_s)
