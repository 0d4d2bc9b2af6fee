"""The processes this process starts, announced the moment each one exists.

vtc's servers, their log relays and its load processes run in sessions of their own (a
terminal's ^C never reaches them), so nothing the operating system offers ends them with the
process that started them. Where that matters (a cluster worker, whose warden stops what the
worker started once the worker is gone, however it went: :mod:`tui.modes.ray_host`), a
listener is told each child's pid by the code that started it, right after the start and
before anything else can happen to it, instead of finding it later by walking the process
tree (a child started between two walks would not be known when the worker is killed).

The starters call :func:`started` (``tui.server.spawn``: the relay and the server;
``tui.load.process``: the load); a listener registered with :func:`listen` is called in the
starter's thread, so it must be quick and thread-safe. A process without listeners (the
console, a local sweep) pays one empty loop per start.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

Listener = Callable[[int], None]
"""Told each child's pid as it starts (from the starting thread)."""

logger = logging.getLogger(__name__)
_lock = threading.Lock()
_listeners: list[Listener] = []


def listen(listener: Listener) -> Callable[[], None]:
    """Tell ``listener`` of every child started from now on; the call that stops it."""
    with _lock:
        _listeners.append(listener)

    def stop() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return stop


def started(pid: int) -> None:
    """A child was just started: every listener is told (a listener's error is its own)."""
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        try:
            listener(pid)
        except Exception:  # a listener's failure never breaks the start it was told of
            logger.exception("a child-start listener failed on pid %d", pid)
