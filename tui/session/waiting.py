"""Waiting for a session's server to reach a state (headless commands and tests)."""

from __future__ import annotations

import asyncio

from tui.domain.events import ServerEvent, ServerState
from tui.session.port import SessionEvent, SessionPort


async def wait_for_state(
    session: SessionPort, states: set[ServerState], timeout: float
) -> ServerState:
    """Wait until the session's server is in one of ``states``; ``TimeoutError`` after ``timeout``.

    Woken by the session's own server events (no polling of the clock in between).
    """
    if session.state in states:
        return session.state
    changed = asyncio.Event()

    def on_event(event: SessionEvent) -> None:
        if isinstance(event, ServerEvent) and session.state in states:
            changed.set()

    session.subscribe(on_event)
    try:
        await asyncio.wait_for(changed.wait(), timeout)
    except TimeoutError:
        if session.state not in states:
            state = session.state.value
            raise TimeoutError(f"server still {state} after {timeout:.0f} s") from None
    return session.state
