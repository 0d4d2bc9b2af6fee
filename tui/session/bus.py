"""The session's event feed: services emit, subscribers (the console, tests) receive."""

from __future__ import annotations

import logging
from collections.abc import Callable

from tui.session.port import SessionEvent

logger = logging.getLogger(__name__)


class EventBus:
    """Delivers each event to every subscriber, in order, on the caller's thread (the loop)."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[SessionEvent], None]] = []

    def subscribe(self, callback: Callable[[SessionEvent], None]) -> None:
        """Deliver every later event to ``callback``."""
        self._listeners.append(callback)

    def emit(self, event: SessionEvent) -> None:
        """Hand ``event`` to each subscriber; one that raises is logged and skipped."""
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # one broken subscriber must not starve the others
                logger.exception("a session subscriber raised on %s", type(event).__name__)
