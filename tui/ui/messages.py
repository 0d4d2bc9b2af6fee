"""Textual messages the console posts to itself."""

from __future__ import annotations

from textual.message import Message

from tui.domain.telemetry import GpuSample, HostSample, ServerMetrics
from tui.session.port import SessionEvent

# Samples that only matter as "the latest one": a backed-up queue keeps just the newest.
_LATEST_ONLY = (GpuSample, ServerMetrics, HostSample)


class SessionEventArrived(Message, bubble=False):
    """One session event, delivered on the app's loop for the main screen to route."""

    def __init__(self, event: SessionEvent) -> None:
        super().__init__()
        self.event = event

    def can_replace(self, message: Message) -> bool:
        """Telemetry samples coalesce by type; log lines, progress (the sparkline wants every
        point) and run updates never do."""
        return (
            isinstance(message, SessionEventArrived)
            and isinstance(self.event, _LATEST_ONLY)
            and type(message.event) is type(self.event)
        )
