"""TEMPORARY: the pre-refactor supervisor and watchers behind the backend protocol.

Lets the session services run against real processes until the server room's new
backends land; deleted then.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tui.domain.events import ServerState
from tui.domain.flags import ServeFlags
from tui.server.adopted import AdoptedServer
from tui.server.attached import AttachedServer
from tui.server.backend import (
    ADOPTED,
    ATTACHED_REMOTE,
    LAUNCHED,
    Capabilities,
    EventSink,
    ServerBackend,
    Takeover,
)
from tui.server.handoff import DetachableSupervisor
from tui.store.server_state import ServerStateRecord


class SupervisorBackend:
    """A launched server (the old ``DetachableSupervisor``)."""

    capabilities: Capabilities = LAUNCHED

    def __init__(self, supervisor: DetachableSupervisor) -> None:
        self._sup = supervisor

    state = property(lambda self: self._sup.state)
    pid = property(lambda self: self._sup.pid)
    base_url = property(lambda self: self._sup.base_url)
    log_lines = property(lambda self: self._sup.log_lines)

    def pids(self) -> set[int]:
        return {p.pid for p in self._sup.known_processes}

    async def stop(self) -> None:
        await self._sup.stop()

    async def detach(self) -> bool:
        return await self._sup.detach()

    async def aclose(self) -> None:
        return None


class LegacyLauncher:
    """Launches through the old supervisor."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: dict[str, str],
        log_dir: Path,
        startup_timeout_s: float,
        grace_s: float,
    ) -> None:
        self._command = list(command)
        self._env = env
        self._log_dir = log_dir
        self._timeout = startup_timeout_s
        self._grace = grace_s

    async def launch(
        self, flags: ServeFlags, on_event: EventSink, *, extra_args: Sequence[str] = ()
    ) -> ServerBackend:
        self._log_dir.mkdir(parents=True, exist_ok=True)
        sup = DetachableSupervisor(
            command=self._command,
            env=self._env,
            log_dir=self._log_dir,
            on_event=on_event,
            startup_timeout_s=self._timeout,
            grace_s=self._grace,
        )
        await sup.start(flags, extra_args)
        return SupervisorBackend(sup)


class LegacyAdopted:
    """An adopted server (the old ``AdoptedServer``)."""

    capabilities: Capabilities = ADOPTED

    def __init__(
        self, record: ServerStateRecord, *, api_key: str | None, grace_s: float, startup: Any
    ) -> None:
        self._record, self._key, self._grace, self._startup = record, api_key, grace_s, startup
        self._inner: AdoptedServer | None = None

    state = property(lambda self: self._inner.state if self._inner else ServerState.IDLE)
    pid = property(lambda self: self._record.pid)
    base_url = property(lambda self: self._record.base_url)
    log_lines = property(lambda self: self._inner.log_lines if self._inner else ())

    def pids(self) -> set[int]:
        return {self._record.pid}

    async def connect(self, on_event: EventSink) -> Takeover:
        self._inner = AdoptedServer(
            self._record, on_event, api_key=self._key, grace_s=self._grace, startup=self._startup
        )
        flags = await self._inner.connect()
        return Takeover(flags=flags, run_id=self._record.run_id, label="adopted")

    def watch(self) -> None:
        assert self._inner is not None
        self._inner.watch()

    async def stop(self) -> None:
        assert self._inner is not None
        await self._inner.stop()

    async def detach(self) -> bool:
        return await self._inner.detach() if self._inner is not None else False

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()


class LegacyAttached:
    """An attached server (the old ``AttachedServer``)."""

    capabilities: Capabilities = ATTACHED_REMOTE

    def __init__(self, url: str, *, api_key: str | None, poll_interval_s: float) -> None:
        self._url, self._key, self._poll = url, api_key, poll_interval_s
        self._inner: AttachedServer | None = None

    state = property(lambda self: self._inner.state if self._inner else ServerState.IDLE)
    pid = property(lambda self: None)
    base_url = property(lambda self: self._url)
    log_lines = property(lambda self: self._inner.log_lines if self._inner else ())

    def pids(self) -> set[int]:
        return set()

    async def connect(self, on_event: EventSink) -> Takeover:
        self._inner = AttachedServer(
            self._url, on_event, api_key=self._key, poll_interval_s=self._poll
        )
        flags = await self._inner.connect()
        return Takeover(flags=flags, run_id=None, label="attached")

    def watch(self) -> None:
        assert self._inner is not None
        self._inner.watch()

    async def stop(self) -> None:
        return None

    async def detach(self) -> bool:
        return False

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()
