"""``Supervisor``: one launched server at a time, restarted with ``start`` (a test driver).

The product launches through :class:`tui.server.launcher.ProcessLauncher` (the session's
server slot holds the server it launched). The integration suites and the server room's
tests drive launches in the older one-server-at-a-time shape; this wrapper gives them that
shape over the same launcher, so what they exercise is the product's launch path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path

from tui.domain.events import ServerState, Stage
from tui.domain.flags.serve import ServeFlags
from tui.server.backend import LAUNCHED, Capabilities, EventSink
from tui.server.launched import LaunchedServer
from tui.server.launcher import DEFAULT_HOST, ProcessLauncher
from tui.server.logbuffer import DEFAULT_MAX_LINES, LogBuffer
from tui.server.probe import HealthProber
from tui.server.process import ProcessInfo, TerminationReport


class Supervisor:
    """One launched server at a time, started again with :meth:`start` (headless callers).

    ``Supervisor(command, env, log_dir, on_event, http)`` is a :class:`ProcessLauncher`
    plus the server it launched last; every property reads that server. :meth:`aclose`
    stops it (the launcher's servers are otherwise left to their own ``stop``).
    """

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str] | None,
        log_dir: Path,
        on_event: EventSink,
        http: HealthProber | None = None,
        *,
        startup_timeout_s: float = 900,
        grace_s: float = 10,
        poll_interval_s: float = 0.25,
        max_log_lines: int = DEFAULT_MAX_LINES,
        default_host: str | None = DEFAULT_HOST,
    ) -> None:
        self.launcher = ProcessLauncher(
            command,
            log_dir=log_dir,
            env=env,
            prober=http,
            startup_timeout_s=startup_timeout_s,
            grace_s=grace_s,
            poll_interval_s=poll_interval_s,
            default_host=default_host,
            max_log_lines=max_log_lines,
        )
        self._on_event = on_event
        self._server: LaunchedServer | None = None
        self._startup_timeout_s = startup_timeout_s
        self._empty_log = LogBuffer(max_lines=1)

    @property
    def server(self) -> LaunchedServer | None:
        """The server launched last, if any."""
        return self._server

    @property
    def capabilities(self) -> Capabilities:
        """A launched server's: it can be stopped and detached."""
        return LAUNCHED

    @property
    def state(self) -> ServerState:
        """The current (or last) server's state; IDLE before the first start."""
        return self._server.state if self._server is not None else ServerState.IDLE

    @property
    def pid(self) -> int | None:
        """The current (or last) server's pid."""
        return self._server.pid if self._server is not None else None

    @property
    def flags(self) -> ServeFlags | None:
        """The flags of the current (or last) start."""
        return self._server.flags if self._server is not None else None

    @property
    def argv(self) -> tuple[str, ...]:
        """Exactly what was executed last."""
        return self._server.argv if self._server is not None else ()

    @property
    def base_url(self) -> str:
        """Where the current (or last) server answers."""
        return self._server.base_url if self._server is not None else "http://127.0.0.1:8000"

    @property
    def log_lines(self) -> LogBuffer:
        """The current (or last) server's log ring."""
        return self._server.log_lines if self._server is not None else self._empty_log

    @property
    def log_path(self) -> Path | None:
        """The current (or last) server's log file."""
        return self._server.log_path if self._server is not None else None

    @property
    def started_at(self) -> datetime | None:
        """When the current (or last) server was launched (UTC)."""
        return self._server.started_at if self._server is not None else None

    @property
    def current_stage(self) -> Stage:
        """The startup stage the log showed most recently."""
        return self._server.current_stage if self._server is not None else Stage.LAUNCHING

    @property
    def exit_code(self) -> int | None:
        """The last server's exit status once it ended."""
        return self._server.exit_code if self._server is not None else None

    @property
    def known_processes(self) -> list[ProcessInfo]:
        """Every process seen in the current (or last) server's tree."""
        return self._server.known_processes if self._server is not None else []

    @property
    def last_termination(self) -> TerminationReport | None:
        """What the last tree termination found."""
        return self._server.last_termination if self._server is not None else None

    @property
    def startup_timeout_s(self) -> float:
        """Seconds a start may take (settable while it starts)."""
        return self._startup_timeout_s

    @startup_timeout_s.setter
    def startup_timeout_s(self, seconds: float) -> None:
        if self._server is not None:
            self._server.startup_timeout_s = seconds
        self._startup_timeout_s = seconds

    def pids(self) -> set[int]:
        """Every process of the current (or last) server's tree seen so far."""
        return self._server.pids() if self._server is not None else set()

    def elapsed(self) -> float:
        """Seconds since the current (or last) launch."""
        return self._server.elapsed() if self._server is not None else 0.0

    async def start(self, flags: ServeFlags, extra_launch_args: Sequence[str] = ()) -> None:
        """Launch ``flags``; refused (``RuntimeError``) while a server runs."""
        if self.state in (ServerState.STARTING, ServerState.READY, ServerState.STOPPING):
            raise RuntimeError(f"a server is already {self.state.value}; stop it first")
        if self._server is not None:
            await self._server.wait_finished()  # the last one's leftovers are cleared
        server = self.launcher.prepare(flags, self._on_event, extra_args=extra_launch_args)
        server.startup_timeout_s = self._startup_timeout_s
        self._server = server  # before its first event: listeners read this supervisor
        await server.begin()

    async def wait_settled(self, timeout_s: float | None = None) -> ServerState:
        """Wait until the current start is decided (READY, FAILED or STOPPED)."""
        if self._server is None:
            return self.state
        return await self._server.wait_settled(timeout_s)

    async def wait_finished(self, timeout_s: float | None = None) -> ServerState:
        """Wait until the current server's watching has ended."""
        if self._server is None:
            return self.state
        return await self._server.wait_finished(timeout_s)

    async def stop(self) -> None:
        """Stop the current server (its whole tree); see ``LaunchedServer.stop``."""
        if self._server is not None:
            await self._server.stop()

    async def detach(self) -> bool:
        """Leave the current server running; ``False`` if there is none to leave."""
        return await self._server.detach() if self._server is not None else False

    async def aclose(self) -> None:
        """Stop the current server and close the launcher's prober."""
        await self.stop()
        if self._server is not None:
            await self._server.aclose()
        await self.launcher.aclose()

    async def __aenter__(self) -> Supervisor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
