"""What a launched server is and what the session reads of it.

:class:`LaunchedRecord` holds a launched server's settings, its process, its log and the
facts the session reads (pid, log path, stage, exit code, the startup timeout);
:class:`tui.server.launched.LaunchedServer` adds the lifecycle task that alone writes them.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tui.domain.diagnosis import FixChecker
from tui.domain.events import Stage
from tui.domain.flags.serve import ServeFlags
from tui.server.backend import LAUNCHED, EventSink
from tui.server.health_watch import HEALTH_INTERVAL_S
from tui.server.logbuffer import DEFAULT_MAX_LINES, LogBuffer
from tui.server.probe import HealthProber, base_url
from tui.server.relay import secrets_from_env
from tui.server.spawn import ServerProcess
from tui.server.stages import StageTracker
from tui.server.watching import WatchedServer


@dataclass(frozen=True)
class LaunchSettings:
    """How a launcher launches: fixed for every server it makes."""

    command: tuple[str, ...]
    env: Mapping[str, str]  # over os.environ; where secrets go
    log_dir: Path
    startup_timeout_s: float
    grace_s: float
    poll_interval_s: float
    max_log_lines: int = DEFAULT_MAX_LINES
    fix_check: FixChecker | None = None  # checks each offered fix (the pre-flight estimate)
    health_interval_s: float = HEALTH_INTERVAL_S  # /health while serving (tui.server.health_watch)


class LaunchedRecord(WatchedServer):
    """A launched server's settings, process and log, and what the session reads of them.

    Written only by :class:`~tui.server.launched.LaunchedServer`'s lifecycle task.
    """

    def __init__(
        self,
        flags: ServeFlags,
        argv: tuple[str, ...],
        settings: LaunchSettings,
        prober: HealthProber,
        on_event: EventSink,
    ) -> None:
        super().__init__(
            LAUNCHED, prober=prober, grace_s=settings.grace_s, max_log_lines=settings.max_log_lines
        )
        self._own_prober = False  # the launcher's, shared by its servers
        self._sink = on_event
        self._flags = flags
        self._argv = argv
        self._settings = settings
        self._env = {**os.environ, **flags.environment, **settings.env}  # see ProcessLauncher
        # Python children would block-buffer a pipe; the log must arrive as it is written.
        self._env.setdefault("PYTHONUNBUFFERED", "1")
        self._log = LogBuffer(max_lines=settings.max_log_lines, secrets=secrets_from_env(self._env))
        self._startup_timeout_s = settings.startup_timeout_s
        self._tracker = StageTracker()
        self._t0 = 0.0
        self._started_at: datetime | None = None
        self._log_path: Path | None = None
        self._proc: ServerProcess | None = None
        self._exit_code: int | None = None
        loop = asyncio.get_running_loop()
        self._launched: asyncio.Future[None] = loop.create_future()
        self._api_up: asyncio.Future[None] = loop.create_future()

    # -- what the session reads -------------------------------------------------------------
    @property
    def flags(self) -> ServeFlags:
        """What it was launched with (the launcher's default host included)."""
        return self._flags

    @property
    def argv(self) -> tuple[str, ...]:
        """Exactly what was executed (no secrets: they are in the environment)."""
        return self._argv

    @property
    def pid(self) -> int | None:
        """Its pid (its process group too), once launched."""
        return self._proc.pid if self._proc is not None else None

    @property
    def relay_pid(self) -> int | None:
        """The pid of its log relay, once launched."""
        return self._proc.relay_pid if self._proc is not None else None

    @property
    def base_url(self) -> str:
        """``http://host:port`` where a local client reaches it."""
        return base_url(self._flags.host, self._flags.effective_port)

    @property
    def log_path(self) -> Path | None:
        """Its log file (written by its relay), once launched."""
        return self._log_path

    @property
    def started_at(self) -> datetime | None:
        """When it was launched (UTC)."""
        return self._started_at

    @property
    def current_stage(self) -> Stage:
        """The startup stage its log showed most recently."""
        return self._tracker.current

    @property
    def exit_code(self) -> int | None:
        """Its exit status once it ended (negative: killed by that signal)."""
        return self._exit_code

    @property
    def startup_timeout_s(self) -> float:
        """Seconds a start may take before it is failed (and killed)."""
        return self._startup_timeout_s

    @startup_timeout_s.setter
    def startup_timeout_s(self, seconds: float) -> None:
        # Settable while starting: an operator may grant a slow model more time.
        if seconds <= 0:
            raise ValueError(f"startup_timeout_s must be > 0, got {seconds}")
        self._startup_timeout_s = seconds

    def elapsed(self) -> float:
        """Seconds since launch."""
        return time.monotonic() - self._t0 if self._t0 else 0.0
