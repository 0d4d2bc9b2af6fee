"""Launching servers: :class:`ProcessLauncher` (the session's ``Launcher``).

Each launch makes a :class:`~tui.server.launched.LaunchedServer`: the server runs in its
own session and process group, its merged stdout/stderr goes to a log relay that writes the
log file and tees the lines to the console (:mod:`tui.server.spawn`), and one task watches
it. Events, in order, for one start (the sink given to :meth:`ProcessLauncher.launch`
receives each):

- pre-launch port check fails: ``Failed(port_in_use)`` only; nothing is launched.
- launched: ``Launched``, ``StageReached(LAUNCHING)``, then ``LogLine`` per line, with
  ``StageReached``/``KvCacheReported`` as the log shows them.
- ready: ``StageReached(READY)``, ``Ready``. Readiness is: our own process alive AND
  ``/health`` answers 200 AND (when the prober can list models) ``/v1/models`` lists the
  model; plus no process outside our tree is the one listening on the port. Probed at once,
  then every poll interval, and every 50 ms once the log says "Starting vLLM server on".
- exit before ready: ``Failed(diagnose(log, flags, exit_code))`` as soon as the process
  exits (not at a timeout), diagnosed from what it wrote before it exited; any leftover
  children are killed after that (``wait_settled()``, ``stop()`` and ``wait_finished()``
  return once they are).
- no ready within ``startup_timeout_s``: the tree is killed, then ``Failed`` of kind
  ``unknown`` naming the stage it was stuck in (or the log's own diagnosis if it has one).
- exit on its own after ready: ``Failed`` first when the exit looks like a failure (the log
  diagnoses to a known kind, or the exit code is not 0; vLLM exits 0 when its engine died,
  so the log decides too), then, once the leftovers are killed, ``Exited(requested=False)``.
  State ends FAILED or STOPPED.
- ``stop()``: ``Exited(requested=True)``; state STOPPED.
- ``detach()``: no event; the server and its relay run on, the log file keeps growing.

What ends a server is what happened first: an exit before the console's request is reported
as that exit (with its cause), a request before the exit as requested.

Secrets (``VLLM_API_KEY``, ``HF_TOKEN``...) travel in ``env`` only, never in argv, and
their values are redacted from every stored log line. Launched servers listen on
:data:`DEFAULT_HOST` (loopback) unless the flags (or the extra arguments) set a host.

:class:`Supervisor` keeps the older one-server-at-a-time shape over a launcher, for
headless callers (the start-up benchmark, the real-vLLM integration suite).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path

from tui.domain.events import ServerState, Stage
from tui.domain.flags import ServeFlags
from tui.server.backend import LAUNCHED, Capabilities, EventSink
from tui.server.launched import LaunchedServer, LaunchSettings
from tui.server.logbuffer import DEFAULT_MAX_LINES, LogBuffer
from tui.server.probe import HealthProber, HttpxProber
from tui.server.process import ProcessInfo, TerminationReport

DEFAULT_HOST = "127.0.0.1"
"""Where a launched server listens unless the operator sets ``--host``: the console only
needs loopback, and vLLM's own default (all interfaces) would expose it to the network."""


def _sets_host(args: Sequence[str]) -> bool:
    return any(a == "--host" or a.startswith("--host=") for a in args)


def with_default_host(
    flags: ServeFlags, extra_args: Sequence[str] = (), host: str | None = DEFAULT_HOST
) -> ServeFlags:
    """``flags`` with ``host`` when neither they nor ``extra_args`` name a host."""
    if host is None or flags.host is not None:
        return flags
    if _sets_host(flags.extra_args) or _sets_host(extra_args):
        return flags
    return flags.replace(host=host)


class ProcessLauncher:
    """Launches ``vllm serve`` (or ``vtc-sim serve``) servers; one ``LaunchedServer`` each.

    ``command`` is the executable prefix (``["vllm"]``, ``["/venv/bin/vllm"]``, the
    simulator); the argv is ``[*command, "serve", *flags.to_argv(), *extra_args]``. ``env``
    is merged over ``os.environ`` at each launch and is where secrets go. ``prober`` asks
    for readiness (default: :class:`HttpxProber` with ``VLLM_API_KEY`` from the merged
    environment, closed by :meth:`aclose`). ``default_host``: see :data:`DEFAULT_HOST`
    (``None``: vLLM's own default).
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        log_dir: Path,
        env: Mapping[str, str] | None = None,
        prober: HealthProber | None = None,
        startup_timeout_s: float = 900,
        grace_s: float = 10,
        poll_interval_s: float = 0.25,
        default_host: str | None = DEFAULT_HOST,
        max_log_lines: int = DEFAULT_MAX_LINES,
    ) -> None:
        if isinstance(command, str) or not command:
            raise ValueError("command must be a non-empty argv list, e.g. ['vllm']")
        if startup_timeout_s <= 0 or grace_s < 0 or poll_interval_s <= 0:
            raise ValueError("startup_timeout_s and poll_interval_s must be > 0, grace_s >= 0")
        self.settings = LaunchSettings(
            command=tuple(command),
            env=dict(env or {}),
            log_dir=Path(log_dir),
            startup_timeout_s=startup_timeout_s,
            grace_s=grace_s,
            poll_interval_s=poll_interval_s,
            max_log_lines=max_log_lines,
        )
        self.default_host = default_host
        self._own_prober = prober is None
        api_key = {**os.environ, **self.settings.env}.get("VLLM_API_KEY")
        self._prober: HealthProber = prober or HttpxProber(api_key=api_key)

    def argv(self, flags: ServeFlags, extra_args: Sequence[str] = ()) -> tuple[str, ...]:
        """What a launch of ``flags`` executes."""
        return (*self.settings.command, "serve", *flags.to_argv(), *extra_args)

    async def launch(
        self, flags: ServeFlags, on_event: EventSink, *, extra_args: Sequence[str] = ()
    ) -> LaunchedServer:
        """Launch ``flags``; returns once launched or refused (a ``Failed`` event says why).

        Only a validated :class:`ServeFlags` is accepted, so an invalid flag set can never
        reach a launch.
        """
        server = self.prepare(flags, on_event, extra_args=extra_args)
        await server.begin()
        return server

    def prepare(
        self, flags: ServeFlags, on_event: EventSink, *, extra_args: Sequence[str] = ()
    ) -> LaunchedServer:
        """The server :meth:`launch` would start, not started yet (``begin()`` starts it).

        For a caller that needs the backend in hand before its first event arrives (the
        launch's own events come before :meth:`launch` returns).
        """
        if not isinstance(flags, ServeFlags):
            raise TypeError(f"launch() takes ServeFlags, not {type(flags).__name__}")
        if isinstance(extra_args, str):
            raise TypeError("extra_args must be a sequence of arguments, not a string")
        flags = with_default_host(flags, extra_args, self.default_host)
        return LaunchedServer(
            flags, self.argv(flags, extra_args), self.settings, self._prober, on_event
        )

    async def aclose(self) -> None:
        """Close the default prober (servers it launched are not touched)."""
        if self._own_prober and isinstance(self._prober, HttpxProber):
            await self._prober.aclose()


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
