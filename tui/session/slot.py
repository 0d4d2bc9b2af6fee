"""The server slot: the one server the session watches now, whichever way it came.

It holds a :class:`~tui.server.backend.ServerBackend` at a time: the existing server the
session began with (adopted or attached), then each server it launches through its
:class:`~tui.server.backend.Launcher`. What a server allows is its
:class:`~tui.server.backend.Capabilities`; the slot checks them and never calls a method
that would refuse. Events of a server the slot has moved on from are dropped, so a late
line of an old server can never land on the new run.

The slot also keeps the state file (the next console's way back to a launched server):
written when a launch is seen, released at a detach, forgotten when the server ends.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from tui.domain.errors import VtcError
from tui.domain.events import Exited, Failed, Launched, ServerEvent, ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.flags.validation import ensure_valid
from tui.domain.server_config import ServerConfig
from tui.server.backend import Capabilities, ExistingServer, Launcher, ServerBackend, Takeover

logger = logging.getLogger(__name__)

LIVE = (ServerState.STARTING, ServerState.READY)
STOPPABLE = (*LIVE, ServerState.STOPPING)  # a stop in progress is joined, not restarted
NO_SERVER = Capabilities(can_stop=False, can_detach=False, local=False)


class StateKeeper(Protocol):
    """Keeps the state file of the launched server (``tui.server`` implements it)."""

    def holds(self, pid: int) -> bool: ...
    def record(
        self,
        *,
        pid: int,
        argv: Sequence[str],
        base_url: str,
        flags: ServeFlags | None,
        log_path: str | None,
        run_id: int | None,
    ) -> bool: ...
    def release(self, pid: int) -> bool: ...
    def forget(self, pid: int | None) -> None: ...


@dataclass(frozen=True)
class LeftRunning:
    """The server a detach left running: its root pid and where it answers.

    Taken before the slot lets the server go (after it the slot holds no server, so its
    pid and URL read ``None``): what the console prints on its way out.
    """

    pid: int
    base_url: str


class LaunchRefused(VtcError):
    """The session cannot launch here (attached to a server it did not start)."""


class ServerSlot:
    """The current server: launch, take over, stop, detach; its events to its listeners."""

    def __init__(
        self,
        *,
        launcher: Launcher | None = None,
        existing: ExistingServer | None = None,
        keeper: StateKeeper | None = None,
        launch_args: Sequence[str] = (),
    ) -> None:
        self._listeners: list[Callable[[ServerEvent], None]] = []
        self._launcher = launcher
        self._existing = existing
        self._keeper = keeper
        self._launch_args = tuple(launch_args)
        self._backend: ServerBackend | None = None
        self._generation = 0
        self._flags: ServeFlags | None = None  # what the launched server runs with
        self._run_id: int | None = None
        self._launching = False  # between prepare() and begin()'s return: stoppable already
        self.left_running: LeftRunning | None = None  # set by a detach that left it running

    def listen(self, callback: Callable[[ServerEvent], None]) -> None:
        """Deliver the current server's events to ``callback`` (the session's handler)."""
        self._listeners.append(callback)

    # -- what it shows ------------------------------------------------------------------------
    @property
    def can_launch(self) -> bool:
        """Whether this session launches servers (not when attached to a URL)."""
        return self._launcher is not None

    @property
    def capabilities(self) -> Capabilities:
        """What the current server allows (nothing before there is one)."""
        return self._backend.capabilities if self._backend is not None else NO_SERVER

    @property
    def server_config(self) -> ServerConfig | None:
        """The existing server's configuration as read from it, while it is the one watched."""
        existing = self._existing
        return existing.config if existing is not None and self._backend is existing else None

    @property
    def state(self) -> ServerState:
        """The current server's lifecycle state (IDLE before the first)."""
        return self._backend.state if self._backend is not None else ServerState.IDLE

    @property
    def pid(self) -> int | None:
        """The current server's root pid, when local."""
        return self._backend.pid if self._backend is not None else None

    @property
    def base_url(self) -> str | None:
        """Where the current server answers (``None`` before the first)."""
        return self._backend.base_url if self._backend is not None else None

    @property
    def log_lines(self) -> Sequence[str]:
        """The current server's log tail."""
        return self._backend.log_lines if self._backend is not None else ()

    def live_pids(self) -> set[int]:
        """The current server's tree while it runs (for the GPU-release wait)."""
        backend = self._backend
        if backend is None or backend.state not in LIVE or not backend.capabilities.local:
            return set()
        pids = set(backend.pids())
        if backend.pid is not None:
            pids.add(backend.pid)
        return pids

    # -- commands -----------------------------------------------------------------------------
    async def take_over(self) -> Takeover | None:
        """First look at the existing server, if the session began with one (no events yet)."""
        existing = self._existing
        if existing is None:
            return None
        self._backend = existing
        takeover = await existing.connect(self._sink_for())
        self._flags = takeover.flags
        return takeover

    def watch(self, run_id: int | None) -> None:
        """Start reporting the existing server taken over, as the run ``run_id``."""
        if self._existing is not None and self._backend is self._existing:
            self._run_id = run_id
            self._existing.watch()

    async def launch(self, flags: ServeFlags, *, run_id: int | None) -> None:
        """Launch ``flags`` as the run ``run_id``; the previous server must be stopped first."""
        if self._launcher is None:
            raise LaunchRefused(
                "attached to a server this console did not start: restart disabled",
                hint="run vtc without --attach to launch servers",
            )
        if self.state in LIVE:
            raise VtcError(f"a server is still {self.state.value}: stop it first")
        ensure_valid(flags)  # the launch gate: flags vLLM would refuse never launch
        await self._retire()
        self._flags, self._run_id = flags, run_id
        # Held before it starts: its Launched (sent while begin() runs) is recorded at once,
        # and a quit or a hang-up meanwhile stops or detaches it. Held only once begin()
        # returned, a console that ended during the launch left a server nothing named.
        server = self._launcher.prepare(flags, self._sink_for(), extra_args=self._launch_args)
        self._backend, self._launching = server, True
        try:
            await server.begin()
        finally:
            self._launching = False

    async def stop(self) -> None:
        """Stop the current server when it runs and may be stopped."""
        backend = self._backend
        if backend is None or not backend.capabilities.can_stop:
            return
        if backend.state in STOPPABLE or self._launching:  # not STARTING until its task runs
            await backend.stop()

    async def detach(self) -> bool:
        """Leave the launched server running for the next console (its state file stays)."""
        backend, keeper = self._backend, self._keeper
        pid = backend.pid if backend is not None else None
        if (
            backend is None
            or keeper is None
            or pid is None
            or not backend.capabilities.can_detach
            or backend.state not in LIVE
            or not keeper.holds(pid)
        ):
            return False
        if not await backend.detach():
            return False
        keeper.release(pid)
        self.left_running = LeftRunning(pid=pid, base_url=backend.base_url)
        self._generation += 1  # whatever it says from now on is no longer ours
        return True

    async def detach_or_stop(self) -> bool:
        """:meth:`detach`; a server that cannot be left running safely is stopped instead."""
        if await self.detach():
            return True
        await self.stop()
        return False

    def abandon(self) -> None:
        """Last resort once the event loop is gone (a crash): SIGKILL the server's group.

        It runs in its own session, so its group id is its pid; orphaned EngineCore and
        Worker processes stay in that group and go with it.
        """
        backend = self._backend
        if backend is None or not backend.capabilities.can_stop:
            return
        pid = backend.pid
        if pid is None or backend.state not in (*LIVE, ServerState.STOPPING):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)

    async def aclose(self) -> None:
        """Stop watching the current server (it is not stopped here); release the launcher."""
        await self._retire()
        if self._launcher is not None:
            await self._launcher.aclose()

    # -- events ------------------------------------------------------------------------------
    async def _retire(self) -> None:
        backend, self._backend = self._backend, None
        self._generation += 1
        if backend is not None:
            await backend.aclose()

    def _sink_for(self) -> Callable[[ServerEvent], None]:
        generation = self._generation = self._generation + 1

        def sink(event: ServerEvent) -> None:
            if generation == self._generation:
                self._deliver(event)

        return sink

    def _deliver(self, event: ServerEvent) -> None:
        # A launched or adopted server is recorded as this console's (the next console's
        # way back to it); an attached one has no keeper.
        if isinstance(event, Launched):
            self._record_state(event)
        elif isinstance(event, Failed | Exited) and self._keeper is not None:
            self._keeper.forget(self.pid)
        for listener in self._listeners:
            listener(event)

    def _record_state(self, event: Launched) -> None:
        keeper, url = self._keeper, self.base_url
        if keeper is None:
            return
        try:
            recorded = keeper.record(
                pid=event.pid,
                argv=event.argv,
                base_url=url or "",
                flags=self._flags,
                log_path=event.log_path,
                run_id=self._run_id,
            )
        except OSError as exc:  # a convenience: it must never break a launch
            logger.warning("cannot write the server state file: %s", exc)
            return
        if not recorded:
            logger.info("state file names another running server: pid %s not recorded", event.pid)
