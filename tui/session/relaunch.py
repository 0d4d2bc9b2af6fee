"""A restart's sequence: the old server stopped and its run ended, the GPU released, the
new run estimated, opened and launched (``Session.restart`` holds it to one at a time)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from tui.domain.errors import VtcError
from tui.domain.events import LogLine
from tui.domain.flags.serve import ServeFlags
from tui.domain.record import RunEnded
from tui.domain.results import RunRecord, RunStatus, StartupProfile, SweepTag
from tui.session.port import LaunchWithdrawn, SessionEvent, SessionInfo
from tui.session.preflight import Preflight
from tui.session.runbook import RunBook
from tui.session.slot import ServerSlot

REPLACED_WHY = "the next run took its place"


class ReleaseWaiter(Protocol):
    """Waits (bounded) until the GPU no longer lists a stopped tree; a message if it could not."""

    async def __call__(self, pids: set[int]) -> str | None: ...


class Relaunch:
    """Replaces the watched server by a new run of given flags."""

    def __init__(
        self,
        info: SessionInfo,
        book: RunBook,
        slot: ServerSlot,
        preflight: Preflight,
        release: ReleaseWaiter | None,
        *,
        stop: Callable[[], Awaitable[None]],
        emit: Callable[[SessionEvent], None],
    ) -> None:
        self._info, self._book, self._slot, self._preflight = info, book, slot, preflight
        self._release, self._stop, self._emit = release, stop, emit

    async def __call__(
        self,
        flags: ServeFlags,
        sweep: SweepTag | None,
        proceed: Callable[[], bool] | None,
        *,
        closing: Callable[[], bool],
    ) -> RunRecord:
        """Stop what runs (``stop``: the load first), launch ``flags`` as a new run; ``proceed``
        is asked once the old server is gone (else :class:`LaunchWithdrawn`), ``closing`` once
        the run is opened (a closing session launches nothing it would not stop)."""
        old_pids, old_run = self._slot.live_pids(), self._book.current
        await self._stop()
        if old_run is not None and old_run.id is not None:
            self._book.apply(RunEnded(RunStatus.REPLACED, REPLACED_WHY), old_run.id)
        await self._wait_release(old_pids)
        if proceed is not None and not proceed():
            raise LaunchWithdrawn("the launch was withdrawn while the old server stopped")
        estimate = await self._preflight.estimate(flags)  # after the stop: its memory is free
        startup = StartupProfile(kv_estimate_tokens=estimate.kv_tokens if estimate else None)
        record = await self._book.open(
            RunRecord(flags=flags, executable=self._info.executable, startup=startup, sweep=sweep)
        )
        if closing():  # closed while stopping: launch nothing the session would not stop
            raise VtcError("the session is closing: no new server")
        launch = flags if flags.port is not None else flags.replace(port=self._info.port)
        await self._slot.launch(launch, run_id=record.id)
        return record

    async def _wait_release(self, pids: set[int]) -> None:
        """Wait until the old server's GPU memory is released (what it said goes to the log)."""
        if self._release is not None and pids:
            message = await self._release(pids)
            if message:
                self._emit(LogLine(f"[vtc] {message}"))
