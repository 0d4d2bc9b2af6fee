"""Is a serving server still answering? ``/health`` with a deadline, while it serves.

A process can be alive and not serve: stopped with SIGSTOP, deadlocked, swapping. Its pid
is there, so the lifecycle stays READY, but the operator must not read a green READY while
every request hangs (issue 17: the GPU and Metrics panels went STALE then DOWN, the Server
panel stayed READY). So, while a server is READY, its ``/health`` is asked every
``interval_s`` with a hard deadline; after ``misses`` probes in a row without a 200 the
backend reports :class:`~tui.domain.events.Unanswered` (again at each further miss, with the
growing silence), and :class:`~tui.domain.events.Answered` once it answers again. The state
itself never changes here: ``s`` still stops it (SIGTERM, SIGKILL after the grace).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

from tui.domain.events import Answered, ServerEvent, Unanswered
from tui.server.probe import HealthProber

HEALTH_INTERVAL_S: Final = 2.0
HEALTH_DEADLINE_S: Final = 3.0
"""vLLM answers ``/health`` from its API server's event loop in milliseconds; 3 s without
an answer is not a busy server but one that does not run."""
HEALTH_MISSES: Final = 2


class HealthWatch:
    """Probes ``url``'s ``/health`` until cancelled; reports silence and recovery to ``emit``."""

    def __init__(
        self,
        prober: HealthProber,
        url: str,
        emit: Callable[[ServerEvent], None],
        *,
        interval_s: float = HEALTH_INTERVAL_S,
        deadline_s: float = HEALTH_DEADLINE_S,
        misses: int = HEALTH_MISSES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._prober = prober
        self._url = url
        self._emit = emit
        self._interval = interval_s
        self._deadline = deadline_s
        self._misses = max(1, misses)
        self._clock = clock
        self.silent = False
        """Whether :class:`Unanswered` was reported and no answer came since."""

    async def probe(self) -> str:
        """One ``/health``: ``""`` for a 200, else why not (no answer, a status, the deadline)."""
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation
        # that arrives as the probe completes, and this loop then never ends (a close that
        # awaits it hangs).
        try:
            async with asyncio.timeout(self._deadline):
                status = await self._prober.health(self._url)
        except TimeoutError:
            return f"no /health answer within {self._deadline:g} s"
        if status == 200:
            return ""
        return "no /health answer" if status is None else f"/health answered HTTP {status}"

    async def run(self) -> None:
        """Probe until cancelled."""
        last_answer = self._clock()
        missed = 0
        while True:
            started = self._clock()
            why = await self.probe()
            if not why:
                last_answer, missed = self._clock(), 0
                if self.silent:
                    self.silent = False
                    self._emit(Answered())
            else:
                missed += 1
                if missed >= self._misses:
                    self.silent = True
                    self._emit(Unanswered(silent_s=self._clock() - last_answer, reason=why))
            await asyncio.sleep(max(0.0, self._interval - (self._clock() - started)))
