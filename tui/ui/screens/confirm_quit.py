"""``q`` asks first when quitting would stop work: a server, a load or a sweep.

One stray key in a shared terminal must not end a load or a sweep: ``q`` (or ``y``) again
confirms, any other key keeps the console running. Nothing running: ``q`` quits at once.
"""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.domain.events import ServerState
from tui.session.port import SessionPort

CONFIRM_KEYS = frozenset({"q", "y"})


def what_quit_stops(session: SessionPort) -> list[str]:
    """What quitting would stop, in the operator's words (empty: nothing runs)."""
    stops = []
    sweeps = session.info.sweeps
    if sweeps is not None and sweeps.running:
        stops.append("the running sweep")
    if session.load_running:
        stops.append("the running load")
    live = session.state in (ServerState.STARTING, ServerState.READY)
    if live and session.can_restart:  # an attached server is never stopped
        current = session.current
        which = f" (run {current.label})" if current is not None and current.label else ""
        stops.append(f"the server{which}")
    return stops


class ConfirmQuitScreen(ModalScreen[bool]):
    """Names what quitting stops; ``q``/``y`` confirms, any other key stays."""

    DEFAULT_CSS = """
    ConfirmQuitScreen {
        align: center middle;
        background: $background 60%;
    }
    #quit-box {
        width: 60;
        max-width: 95%;
        height: auto;
        border: round $warning;
        background: $surface;
        padding: 0 1;
    }
    """

    def __init__(self, stops: list[str]) -> None:
        super().__init__()
        self._stops = stops

    def compose(self) -> ComposeResult:
        """What stops, and the keys."""
        with Vertical(id="quit-box"):
            yield Static(f"Quitting stops {', '.join(self._stops)}.", id="quit-what")
            yield Static("q or y: quit · any other key: stay", id="quit-keys")

    def on_mount(self) -> None:
        """Title the box."""
        self.query_one("#quit-box").border_title = "Quit?"

    def on_key(self, event: events.Key) -> None:
        """One key decides."""
        event.stop()
        event.prevent_default()
        self.dismiss(event.key in CONFIRM_KEYS)
