"""Reattach: the server a previous console started, found through its state file.

The pieces, in the order a server meets them:

- :class:`~tui.server.state_keeper.ServerStateKeeper` keeps ``server.json`` in step with the
  server a console launches, and :func:`~tui.server.state_keeper.inspect_state_file`
  decides, when the next ``vtc`` starts, whether the recorded server still runs.
- :class:`AdoptedServer` watches such a server for the session in place of a launched
  one: not our child, so psutil says whether it lives, ``/health`` whether it serves, and
  its log file (kept growing by its relay, :mod:`tui.server.relay`, which outlives the
  console that launched it) is tailed into ``log_lines``. ``stop()`` takes the whole tree
  down the way a launched server is stopped.
- :func:`~tui.server.stopper.stop_recorded_server` is ``vtc stop``.

The names of the three modules are importable from here too (their callers are many).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from tui.domain.events import Exited, Failed, Launched, LogLine, Ready, ServerState
from tui.domain.flags.serve import ServeFlags, stored_context
from tui.domain.results import StartupProfile
from tui.domain.server_config import ServerConfig
from tui.server.backend import ADOPTED, EventSink, Takeover
from tui.server.diagnose import diagnose
from tui.server.health_watch import HealthWatch
from tui.server.logbuffer import DEFAULT_MAX_LINES
from tui.server.probe import HealthProber
from tui.server.process import (
    STOP_GRACE_S,
    ProcessInfo,
)
from tui.server.stages import StageTracker
from tui.server.state_keeper import (
    Inspection,
    ServerStateKeeper,
    StateCheck,
    argv_matches,
    check_record,
    inspect_state_file,
)
from tui.server.stopper import StopOutcome, stop_recorded_server
from tui.server.watching import Request, WatchedServer, cancel_and_wait, wait_first
from tui.store.server_state import ServerStateRecord

__all__ = [
    "AdoptedServer",
    "Inspection",
    "ServerStateKeeper",
    "StateCheck",
    "StopOutcome",
    "argv_matches",
    "check_record",
    "inspect_state_file",
    "stop_recorded_server",
]

logger = logging.getLogger(__name__)

_INITIAL_TAIL_LINES = 200  # what a reattached console shows of the log before new lines
_TAIL_READ_BYTES = 256 * 1024
_DIAGNOSE_READ_BYTES = 2 * 1024 * 1024  # enough of the log for a traceback and its context
_LOG_HEADER = "# vtc: "  # the supervisor's first line in a log file (the command), not output


# -- watching an adopted server ---------------------------------------------------------------
def _read_tail(path: Path, max_bytes: int, end: int | None = None) -> tuple[list[str], int]:
    """The complete lines in the last ``max_bytes`` of ``path`` (up to byte ``end``), and
    the file's size (or ``end``)."""
    with path.open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        if end is not None:
            size = min(size, end)
        start = max(0, size - max_bytes)
        f.seek(start)
        data = f.read(size - start)
    lines = data.decode("utf-8", errors="replace").split("\n")
    if start > 0:
        lines = lines[1:]  # the first one is cut
    if lines and lines[-1] == "":
        lines.pop()
    return [line for line in lines if not line.startswith(_LOG_HEADER)], size


class AdoptedServer(WatchedServer):
    """A running server a previous console started, watched in the launcher's place.

    The server is not this process's child, so there is no exit code (``None``
    throughout). States: STARTING until ``/health`` first answers 200, then READY; STOPPED
    (or FAILED, when its log diagnoses a known failure) once its process is gone. It can be
    stopped, not detached: it is already independent of any console (its log relay too),
    so a hang-up only stops the watching (:meth:`aclose`).
    """

    label = "adopted"
    """The label of the board card made for it when its own run is no longer stored."""

    def __init__(
        self,
        record: ServerStateRecord,
        *,
        prober: HealthProber | None = None,
        api_key: str | None = None,
        grace_s: float = STOP_GRACE_S,
        poll_interval_s: float = 0.25,
        health_interval_s: float = 1.0,
        startup: StartupProfile | None = None,
        max_log_lines: int = DEFAULT_MAX_LINES,
    ) -> None:
        super().__init__(
            ADOPTED, prober=prober, api_key=api_key, grace_s=grace_s, max_log_lines=max_log_lines
        )
        self._record = record
        self._poll_s = poll_interval_s
        self._health_s = health_interval_s
        self._health: asyncio.Future[None] | None = None
        self._startup = startup  # how its start went, from its run record (if stored)
        self._log_pos = 0
        self._partial = b""
        self._tracker = StageTracker()
        self._root = ProcessInfo(pid=record.pid, create_time=record.create_time)
        self._known[(record.pid, record.create_time)] = self._root

    # -- what the session reads -------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """The server's pid (its process group too)."""
        return self._record.pid

    @property
    def config(self) -> ServerConfig | None:
        """``None``: a console launched it, so its flags are the state file's, not read."""
        return None

    @property
    def base_url(self) -> str:
        """Where it answers, as recorded."""
        return self._record.base_url

    @property
    def run_id(self) -> int | None:
        """The stored run this server belongs to (the session makes it current again)."""
        return self._record.run_id

    @property
    def record(self) -> ServerStateRecord:
        """The state record it was adopted from."""
        return self._record

    @property
    def flags(self) -> ServeFlags:
        """The flags it was launched with (the model only, if the record's do not parse)."""
        try:
            # Read back as stored: valid by the rules it was launched under.
            return ServeFlags.model_validate(self._record.flags, context=stored_context())
        except ValidationError:
            model = self._record.flags.get("model")
            return ServeFlags(model=model if isinstance(model, str) and model else "unknown")

    def _elapsed(self) -> float:
        return max(0.0, (datetime.now(UTC) - self._record.started_at).total_seconds())

    # -- the session's commands -------------------------------------------------------------
    async def connect(self, on_event: EventSink) -> Takeover:
        """A first look (no events yet): the log's tail, whether it serves; later events go
        to ``on_event``."""
        self._sink = on_event
        await asyncio.to_thread(self._read_initial_tail)
        if not await asyncio.to_thread(self._root.is_alive):
            self._set_state(ServerState.STOPPED)
        elif await self._prober.health(self.base_url) == 200:
            self._set_state(ServerState.READY)
        else:
            self._set_state(ServerState.STARTING)
        return Takeover(flags=self.flags, run_id=self._record.run_id, label=self.label)

    def watch(self) -> None:
        """Announce the server (``Launched``, the log tail, ``Ready``), then watch it."""
        self._start(self._run, "vtc-adopted-server")

    async def stop(self) -> None:
        """SIGTERM its group, SIGKILL after ``grace_s``, verify the tree; ``Exited``.

        Safe to call more than once; returns once the tree is gone (also when it ended on
        its own meanwhile, which is then reported as such).
        """
        self._ask(Request.STOP)
        self._start(self._run, "vtc-adopted-server")
        await self._finished()

    async def detach(self) -> bool:
        """Stop watching and leave it running for the next console; ``False`` if it ended.

        It already runs apart from any console: detaching is only letting go of it.
        """
        if self.state not in (ServerState.STARTING, ServerState.READY):
            return False
        await self._release()
        return True

    # -- the lifecycle ----------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            await self._follow()
        finally:  # /health is asked while it serves (tui.server.health_watch)
            if self._health is not None:
                await cancel_and_wait(self._health)
                self._health = None

    async def _follow(self) -> None:
        if self._requested() is None:
            self._announce()
        loop = asyncio.get_running_loop()
        last_health = last_snapshot = loop.time()
        while True:
            request = self._requested()
            if request is not None and request is not Request.STOP:
                return  # released: the server runs on, unwatched by this console
            await self._follow_log()
            if not await asyncio.to_thread(self._root.is_alive):
                await self._on_gone()  # on its own: nothing was signalled yet
                return
            if request is Request.STOP:
                await self._on_stop()
                return
            now = loop.time()
            if now - last_snapshot >= 1.0:
                await asyncio.to_thread(self._remember_tree, self._record.pid)
                last_snapshot = now
            if self._state is ServerState.STARTING and now - last_health >= self._health_s:
                last_health = now
                if await self._prober.health(self.base_url) == 200:
                    self._set_state(ServerState.READY)
                    self._emit_ready()
            if self._state is ServerState.READY and self._health is None:
                watch = HealthWatch(self._prober, self.base_url, self._emit)
                self._health = asyncio.ensure_future(watch.run())
            await wait_first(self._requests(), timeout_s=self._poll_s)

    def _announce(self) -> None:
        record = self._record
        self._emit(Launched(pid=record.pid, argv=tuple(record.argv), log_path=record.log_path))
        for line in self._log.lines():
            self._emit(LogLine(text=line))
        if self._state is ServerState.READY:
            self._emit_ready()

    def _emit_ready(self) -> None:
        """``Ready`` with the figures of its start (the record's, else what the log showed)."""
        startup, kv = self._startup, self._tracker.kv_cache
        elapsed = startup.seconds_to_ready if startup is not None else None
        tokens = startup.kv_cache_tokens if startup is not None else None
        concurrency = startup.max_concurrency if startup is not None else None
        self._emit(
            Ready(
                elapsed=elapsed if elapsed is not None else self._elapsed(),
                kv_cache_tokens=tokens if tokens is not None else (kv.tokens if kv else None),
                max_concurrency=(
                    concurrency if concurrency is not None else (kv.max_concurrency if kv else None)
                ),
                timed=False,
            )
        )

    def _read_initial_tail(self) -> None:
        path = self._record.log_path
        if not path:
            return
        try:
            lines, self._log_pos = _read_tail(Path(path), _TAIL_READ_BYTES)
        except OSError as exc:
            self._log.append(f"[vtc] cannot read the server's log {path}: {exc.strerror or exc}")
            return
        for line in lines[-_INITIAL_TAIL_LINES:]:
            self._log.append(line)

    def _read_new_lines(self) -> list[str]:
        """Complete lines appended to the log file since the last read."""
        path = self._record.log_path
        if not path:
            return []
        try:
            with open(path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                if size < self._log_pos:  # truncated or replaced: start over
                    self._log_pos, self._partial = 0, b""
                if size == self._log_pos:
                    return []
                f.seek(self._log_pos)
                data = f.read(size - self._log_pos)
        except OSError:
            return []
        self._log_pos += len(data)
        *complete, self._partial = (self._partial + data).split(b"\n")
        return [raw.decode("utf-8", errors="replace") for raw in complete]

    async def _follow_log(self) -> None:
        for line in await asyncio.to_thread(self._read_new_lines):
            stored = self._log.append(line)
            self._emit(LogLine(text=stored))
            if self._state is ServerState.STARTING:
                self._emit_all(self._tracker.feed(stored, self._elapsed()))

    async def _on_gone(self) -> None:
        """It exited on its own: say why if its log knows, then clear its leftovers."""
        # The log as it stood when the exit was noticed: what orphans write once the
        # teardown below signals them is the console's doing, not the cause.
        text = await asyncio.to_thread(self._log_text_for_diagnosis, self._log_pos)
        diagnosis = await asyncio.to_thread(diagnose, text, flags=self.flags, exit_code=None)
        failed = diagnosis.kind != "unknown"
        if failed:
            self._set_state(ServerState.FAILED)
            self._emit(Failed(elapsed=self._elapsed(), exit_code=None, diagnosis=diagnosis))
        await self._terminate(self._record.pgid, None)  # orphaned EngineCore/Worker processes
        await self._follow_log()
        self._set_state(ServerState.FAILED if failed else ServerState.STOPPED)
        self._emit(Exited(exit_code=None, requested=False))

    def _log_text_for_diagnosis(self, upto: int) -> str:
        path = self._record.log_path
        if path:
            with contextlib.suppress(OSError):
                return "\n".join(_read_tail(Path(path), _DIAGNOSE_READ_BYTES, upto)[0])
        return self._log.text()

    async def _on_stop(self) -> None:
        self._set_state(ServerState.STOPPING)
        report = await self._terminate(self._record.pgid, self._record.pid)
        await self._follow_log()
        how = "SIGKILL after the grace period" if report.escalated else "SIGTERM"
        self._log.append(f"[vtc] stopped pid {self._record.pid} ({how})")
        self._set_state(ServerState.STOPPED)
        self._emit(Exited(exit_code=None, requested=True))
