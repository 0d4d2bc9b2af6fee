"""Fake servers behind ``tui.server.backend``'s protocol, driven by the test.

``FakeLauncher.prepare`` returns a :class:`FakeBackend` whose ``begin`` emits ``Launched``; the
test then plays the server's life with :meth:`FakeBackend.ready`, :meth:`FakeBackend.fail`
and :meth:`FakeBackend.exit`. :class:`FakeExisting` is an adopted or attached server.
Every command is recorded in ``calls`` so a test can assert what the session asked for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from tui.domain.diagnosis import Diagnosis
from tui.domain.events import Exited, Failed, Launched, LogLine, Ready, ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.server_config import ServerConfig
from tui.server.backend import (
    ADOPTED,
    ATTACHED_REMOTE,
    LAUNCHED,
    Capabilities,
    EventSink,
    Takeover,
)


class FakeBackend:
    """A server whose life the test scripts; implements ``ServerBackend``."""

    def __init__(
        self,
        sink: EventSink,
        *,
        pid: int | None,
        url: str,
        capabilities: Capabilities = LAUNCHED,
        tree: Sequence[int] = (),
        detachable: bool = True,
        port_busy: bool = False,
        begun: asyncio.Event | None = None,
    ) -> None:
        self.sink = sink
        self.port_busy = port_busy  # begin() refuses the way a busy port does
        self.begun = begun  # set: begin() returns only once it is set (a launch in progress)
        self.capabilities = capabilities
        self.state = ServerState.IDLE
        self.pid = pid
        self.base_url = url
        self.log_lines: list[str] = []
        self.tree = set(tree)
        self.detachable = detachable  # False: detach() refuses (e.g. the server just ended)
        self.calls: list[str] = []

    def pids(self) -> set[int]:
        """The scripted tree."""
        return set(self.tree) if self.capabilities.local else set()

    async def begin(self) -> None:
        """Launched (or refused, port busy), as the launcher's server does; then returns,
        once ``begun`` is set when the test holds the launch there."""
        if self.port_busy:
            self.fail(Diagnosis(kind="port_in_use", summary="port busy"), exit_code=None)
            return
        self.launched()
        if self.begun is not None:
            await self.begun.wait()

    # -- the test plays the server ----------------------------------------------------------
    def launched(self, argv: Sequence[str] = ("vllm", "serve", "m")) -> None:
        """The process started."""
        assert self.pid is not None
        self.state = ServerState.STARTING
        self.sink(Launched(pid=self.pid, argv=tuple(argv), log_path="/tmp/fake.log"))

    def line(self, text: str) -> None:
        """One log line."""
        self.log_lines.append(text)
        self.sink(LogLine(text))

    def ready(self, elapsed: float = 1.0, *, kv: int | None = 1000, timed: bool = True) -> None:
        """It answers /health."""
        self.state = ServerState.READY
        self.sink(Ready(elapsed=elapsed, kv_cache_tokens=kv, max_concurrency=2.0, timed=timed))

    def fail(self, diagnosis: Diagnosis, exit_code: int | None = 1) -> None:
        """The start failed."""
        self.state = ServerState.FAILED
        self.sink(Failed(elapsed=2.0, exit_code=exit_code, diagnosis=diagnosis))

    def exit(self, code: int | None = 0, *, requested: bool = False) -> None:
        """It ended."""
        self.state = ServerState.STOPPED
        self.sink(Exited(exit_code=code, requested=requested))

    # -- the protocol ---------------------------------------------------------------------
    async def stop(self) -> None:
        """Stop: ``Exited(requested=True)``."""
        self.calls.append("stop")
        assert self.capabilities.can_stop, "the slot must check can_stop first"
        if self.state in (ServerState.STARTING, ServerState.READY):
            self.exit(0, requested=True)

    async def detach(self) -> bool:
        """Leave it running (or refuse, as scripted)."""
        self.calls.append("detach")
        return self.detachable and self.state in (ServerState.STARTING, ServerState.READY)

    async def aclose(self) -> None:
        """Stop watching."""
        self.calls.append("aclose")


@dataclass
class FakeLauncher:
    """Launches :class:`FakeBackend` servers with pids 1000, 1001...; records each launch."""

    pid_base: int = 1000
    launched: list[FakeBackend] = field(default_factory=list)
    flags: list[ServeFlags] = field(default_factory=list)
    extra: list[tuple[str, ...]] = field(default_factory=list)
    port_busy: bool = False  # refuse the next launch the way a busy port does
    begun: asyncio.Event | None = None  # set: each launch returns only once it is set

    def prepare(
        self, flags: ServeFlags, on_event: EventSink, *, extra_args: Sequence[str] = ()
    ) -> FakeBackend:
        """A new fake server, not started: :meth:`FakeBackend.begin` emits ``Launched`` (or
        ``Failed``, port busy)."""
        pid = self.pid_base + len(self.launched)
        backend = FakeBackend(
            on_event,
            pid=pid,
            url=f"http://127.0.0.1:{flags.effective_port}",
            tree=(pid, pid + 500),
            port_busy=self.port_busy,
            begun=self.begun,
        )
        self.launched.append(backend)
        self.flags.append(flags)
        self.extra.append(tuple(extra_args))
        return backend

    async def launch(
        self, flags: ServeFlags, on_event: EventSink, *, extra_args: Sequence[str] = ()
    ) -> FakeBackend:
        """:meth:`prepare`, begun: a fake server that has emitted ``Launched`` (or ``Failed``)."""
        backend = self.prepare(flags, on_event, extra_args=extra_args)
        await backend.begin()
        return backend

    async def aclose(self) -> None:
        """Nothing held."""

    @property
    def last(self) -> FakeBackend:
        """The newest server."""
        return self.launched[-1]


class FakeExisting(FakeBackend):
    """An adopted (local) or attached (remote) server found running."""

    def __init__(
        self,
        *,
        flags: ServeFlags,
        run_id: int | None,
        label: str,
        pid: int | None = 4242,
        url: str = "http://127.0.0.1:8000",
        ready: bool = True,
        config: ServerConfig | None = None,
    ) -> None:
        caps = ADOPTED if pid is not None else ATTACHED_REMOTE
        super().__init__(lambda event: None, pid=pid, url=url, capabilities=caps, tree=(pid or 0,))
        self.takeover = Takeover(flags=flags, run_id=run_id, label=label)
        self.serving = ready
        self.config: ServerConfig | None = config

    async def connect(self, on_event: EventSink) -> Takeover:
        """First look: no events yet."""
        self.calls.append("connect")
        self.sink = on_event
        self.state = ServerState.READY if self.serving else ServerState.STARTING
        return self.takeover

    def watch(self) -> None:
        """Announce it as the real watchers do."""
        self.calls.append("watch")
        if self.pid is not None:
            self.sink(Launched(pid=self.pid, argv=("vllm", "serve"), log_path=None))
        if self.state is ServerState.READY:
            self.sink(Ready(elapsed=0.0, timed=False))
