"""The tuning loop as small services behind one facade (``Session``) and its port.

- :mod:`tui.session.port`: what the console sees (``SessionPort``, ``SessionInfo``, the
  session's events); the console imports only this module and ``tui.domain``.
- :mod:`tui.session.runbook`: runs, labels and store writes (records change through the
  pure fold ``tui.domain.record.apply``).
- :mod:`tui.session.slot`: the one server watched now (launched, adopted or attached).
- :mod:`tui.session.hub`: telemetry sources, their pollers, the peaks of a load.
- :mod:`tui.session.preflight`: estimates and the installed vLLM's flags, off the loop.
- :mod:`tui.session.loads`: one load run at a time.
- :mod:`tui.session.facade`: ``Session``, which sequences them.

The services are built by a mode (``tui.modes``) from the adapters it chose.
"""

from __future__ import annotations

from tui.session.facade import Session
from tui.session.port import LoadFinished, RunUpdated, SessionEvent, SessionInfo, SessionPort
from tui.session.waiting import wait_for_state

__all__ = [
    "LoadFinished",
    "RunUpdated",
    "Session",
    "SessionEvent",
    "SessionInfo",
    "SessionPort",
    "wait_for_state",
]
