"""What every server backend shares: its events, its process tree, its end.

:class:`WatchedServer` is the base of the launched (:mod:`tui.server.launched`), adopted
(:mod:`tui.server.adopted`) and attached (:mod:`tui.server.attached`) servers:

- events go to the sink it was given, on the event loop, in order; a sink that raises is
  logged and watching goes on;
- every process seen in a local server's tree is remembered (pid *and* start time), so
  orphans are found after their parent died, and :meth:`pids` names them;
- termination is one way for all: SIGTERM to the group and to every remembered process,
  SIGKILL after the grace period, a psutil check that nothing survived
  (:func:`tui.server.process.terminate_tree`);
- its lifecycle is one task (:meth:`_run` of the subclass), the only writer of its state;
  the console's commands (stop, detach, release) are *requests* that task carries out.
  The first request wins; ``stop``, ``detach`` and ``aclose`` then wait for the task.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from tui.domain.events import ServerEvent, ServerState
from tui.domain.url_credentials import UrlCredential
from tui.server.backend import Capabilities, EventSink
from tui.server.logbuffer import DEFAULT_MAX_LINES, LogBuffer
from tui.server.probe import HealthProber, HttpxProber
from tui.server.process import (
    STOP_GRACE_S,
    ProcessInfo,
    TerminationReport,
    snapshot_tree,
    terminate_tree,
)

logger = logging.getLogger(__name__)

KILL_WAIT_S = 3.0
"""How long a tree may take to vanish after SIGKILL (normally milliseconds); with the
grace period and what follows the kill (see ``tui.server.launched``), a stop stays
within ``grace_s`` + 5 s."""


class Request(enum.Enum):
    """What the console asked of a watched server (the first request wins)."""

    STOP = "stop"  # stop the whole tree
    DETACH = "detach"  # stop watching, leave it running for the next console
    RELEASE = "release"  # stop watching (aclose): never stops it


def append_note(path: str | None, line: str) -> None:
    """Append one of the console's own lines to a server's log file (blocking, tiny)."""
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8", errors="replace") as f:
            f.write(line + "\n")
    except OSError as exc:  # the note is still in the panel
        logger.warning("cannot append to %s: %s", path, exc)


class WatchedServer:
    """The shared part of every backend (see the module docstring).

    ``prober``: how ``/health`` is asked; a default :class:`HttpxProber` (with ``api_key``)
    is made, and closed by :meth:`aclose`, when none is given.
    """

    def __init__(
        self,
        capabilities: Capabilities,
        *,
        prober: HealthProber | None = None,
        api_key: str | None = None,
        grace_s: float = STOP_GRACE_S,
        max_log_lines: int = DEFAULT_MAX_LINES,
        credential: UrlCredential | None = None,
    ) -> None:
        self._capabilities = capabilities
        self._own_prober = prober is None
        self._prober: HealthProber = prober or HttpxProber(api_key=api_key, credential=credential)
        self._grace_s = grace_s
        self._sink: EventSink | None = None
        self._state = ServerState.IDLE
        self._log = LogBuffer(max_lines=max_log_lines)
        self._known: dict[tuple[int, float], ProcessInfo] = {}
        self._task: asyncio.Task[object] | None = None
        self._request: asyncio.Future[Request] | None = None
        self._request_at: float | None = None  # when the first request was made (monotonic)
        self._settled: asyncio.Future[ServerState] | None = None
        self.last_termination: TerminationReport | None = None
        """What the last tree termination found (survivors are logged as a warning)."""

    # -- what the session reads -------------------------------------------------------------
    @property
    def capabilities(self) -> Capabilities:
        """What the console may do with it."""
        return self._capabilities

    @property
    def state(self) -> ServerState:
        """Where it is in its lifecycle."""
        return self._state

    @property
    def log_lines(self) -> LogBuffer:
        """The tail of its log, as this console saw it."""
        return self._log

    @property
    def known_processes(self) -> list[ProcessInfo]:
        """Every process seen in its tree (kept to find orphans)."""
        return list(self._known.values())

    def pids(self) -> set[int]:
        """Every process of its tree seen so far (empty when not local)."""
        return {info.pid for info in list(self._known.values())}

    async def wait_settled(self, timeout_s: float | None = None) -> ServerState:
        """Wait until its start is decided (READY, FAILED or STOPPED) or watching ended.

        A failed start settles once its process tree is gone (its ``Failed`` event may come
        before that).
        """
        return await asyncio.wait_for(asyncio.shield(self._settle_future()), timeout_s)

    async def wait_finished(self, timeout_s: float | None = None) -> ServerState:
        """Wait until watching has ended (its end handled, stopped or let go)."""
        if self._task is not None:
            await asyncio.wait_for(self._finished(), timeout_s)
        return self._state

    def _settle_future(self) -> asyncio.Future[ServerState]:
        if self._settled is None:
            self._settled = asyncio.get_running_loop().create_future()
        return self._settled

    def _set_state(self, state: ServerState, *, settle: bool = True) -> None:
        """The only way the lifecycle task changes the state (settles a start once decided,
        unless told the settling comes later)."""
        self._state = state
        if settle and state in (ServerState.READY, ServerState.FAILED, ServerState.STOPPED):
            self._settle()

    def _settle(self) -> None:
        future = self._settle_future()
        if not future.done():
            future.set_result(self._state)

    # -- events -----------------------------------------------------------------------------
    def _emit(self, event: ServerEvent) -> None:
        if self._sink is None:
            return
        try:
            self._sink(event)
        except Exception:  # a broken listener must not break the watching (logged)
            logger.exception("the event sink raised for %r", type(event).__name__)

    def _emit_all(self, events: Sequence[ServerEvent]) -> None:
        for event in events:
            self._emit(event)

    # -- the process tree -------------------------------------------------------------------
    def _remember_tree(self, root: int | None) -> list[ProcessInfo]:
        """Snapshot ``root``'s tree into the remembered processes (blocking: psutil)."""
        if root is None:
            return []
        tree = snapshot_tree(root)
        for info in tree:
            self._known.setdefault((info.pid, info.create_time), info)
        return tree

    async def _terminate(
        self, pgid: int | None, root: int | None, log_path: str | None = None
    ) -> TerminationReport:
        """End the tree: SIGTERM, ``grace_s``, SIGKILL, verify (in a thread)."""

        def work() -> TerminationReport:
            self._remember_tree(root)
            known = list(self._known.values())
            report = terminate_tree(pgid, known, grace_s=self._grace_s, kill_wait_s=KILL_WAIT_S)
            if report.survivors:
                names = ", ".join(f"{p.pid} ({p.name})" for p in report.survivors)
                logger.warning("processes survived SIGKILL: %s", names)
                append_note(log_path, f"[vtc] WARNING: processes survived SIGKILL: {names}")
            return report

        report = await asyncio.to_thread(work)
        self.last_termination = report
        if report.survivors:
            names = ", ".join(f"{p.pid} ({p.name})" for p in report.survivors)
            self._log.append(f"[vtc] WARNING: processes survived SIGKILL: {names}")
        return report

    # -- the lifecycle task and its requests ------------------------------------------------
    def _requests(self) -> asyncio.Future[Request]:
        if self._request is None:
            self._request = asyncio.get_running_loop().create_future()
        return self._request

    def _ask(self, request: Request) -> Request:
        """Ask the lifecycle for ``request``; returns the request that won (the first)."""
        future = self._requests()
        if not future.done():
            self._request_at = time.monotonic()
            future.set_result(request)
        return future.result()

    def _requested(self) -> Request | None:
        """The request made so far, if any (read by the lifecycle task)."""
        future = self._request
        return future.result() if future is not None and future.done() else None

    def _start(self, run: Callable[[], Awaitable[object]], name: str) -> asyncio.Task[object]:
        """Start the lifecycle task (once)."""
        self._requests()
        if self._task is None:
            self._task = asyncio.create_task(self._guarded(run), name=name)
        return self._task

    async def _guarded(self, run: Callable[[], Awaitable[object]]) -> object:
        try:
            return await run()
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug in watching: logged; the subclass reports the end
            logger.exception("watching %s failed", type(self).__name__)
            await self._on_crash()
            return None

    async def _on_crash(self) -> None:
        """The lifecycle task raised: the subclass ends the server's story (best effort)."""

    async def _finished(self) -> object:
        """Wait for the lifecycle task (``None`` if it never started)."""
        task = self._task
        if task is None:
            return None
        return await asyncio.shield(task)

    async def _release(self) -> None:
        """Stop watching, leaving the server as it is, and wait for that."""
        if self._task is not None and not self._task.done():
            self._ask(Request.RELEASE)
            try:
                await self._finished()
            except asyncio.CancelledError:
                _reraise_own_cancel()  # the lifecycle's own cancel (loop shutdown) is no error

    async def aclose(self) -> None:
        """Stop watching and release what watching holds; never stops the server."""
        await self._release()
        if self._own_prober and isinstance(self._prober, HttpxProber):
            await self._prober.aclose()


def _reraise_own_cancel() -> None:
    """Inside ``except CancelledError``: re-raise when the current task is being cancelled.

    Awaiting another task that was cancelled raises ``CancelledError`` too; only a cancel
    of the current task must go on (swallowing it would leave its canceller waiting).
    """
    current = asyncio.current_task()
    if current is not None and current.cancelling():
        raise asyncio.CancelledError


async def cancel_and_wait(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` and wait for it to end, without swallowing a cancel of our own."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        _reraise_own_cancel()


async def wait_first(*futures: asyncio.Future[Any], timeout_s: float | None = None) -> None:
    """Wait until one of ``futures`` is done, or ``timeout_s`` passes."""
    pending = set(futures)
    if any(f.done() for f in pending):
        return
    await asyncio.wait(pending, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
