"""A server this console launched: its whole lifecycle as one task.

:class:`LaunchedServer` is made by :class:`tui.server.launcher.ProcessLauncher`. One
asyncio task (``_run``) launches it, decides readiness, notices the exit or the timeout,
carries out the console's requests (stop, detach, release) and reports every step as an
event; nothing else writes its state. Which end happened is taken from what happened first
(the process's exit or the console's request), and a failure is diagnosed from the log as
it stood when the server exited, before the console's own teardown could add to it.
The events and their order are listed in :mod:`tui.server.launcher`.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import shlex
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tui.domain.diagnosis import Diagnosis, FixChecker
from tui.domain.events import (
    Exited,
    Failed,
    Launched,
    LogLine,
    Ready,
    ServerState,
    Stage,
    StageReached,
)
from tui.domain.flags.serve import ServeFlags
from tui.server.diagnose import diagnose, port_in_use_diagnosis
from tui.server.health_watch import HealthWatch
from tui.server.launched_record import LaunchedRecord, LaunchSettings
from tui.server.probe import held_by_stranger, port_holder, port_is_busy
from tui.server.process import snapshot_tree
from tui.server.spawn import ServerProcess
from tui.server.watching import (
    Request,
    append_note,
    cancel_and_wait,
    wait_first,
)
from tui.store.private import private_dir

__all__ = ["End", "LaunchSettings", "LaunchedServer", "model_listed", "new_log_path"]

logger = logging.getLogger(__name__)

# After the log's "Starting vLLM server on" the socket listens within milliseconds: probing
# this often until it answers keeps /health-200-to-Ready well under the 0.3 s goal.
POLL_AFTER_API_UP_S = 0.05
SERVING_SNAPSHOT_S = 1.0  # a tree snapshot costs ~1 ms per 100 processes on the host
SYNC_S = 5.0  # the relay passes the sync token on in milliseconds; this bounds a stuck one
AFTER_KILL_S = 2.0  # exit status, end of log and relay once the tree is verified gone
SURVIVOR_WAIT_S = 0.5  # the same when processes survived SIGKILL (they hold the pipe)


class End(enum.Enum):
    """How a launched server's watching ended."""

    REFUSED = "refused"  # never launched (port in use, no executable)
    READY = "ready"  # (not an end: the start succeeded, watching goes on)
    EXITED = "exited"  # the process ended on its own
    TIMED_OUT = "timed out"  # not ready in time: killed
    STOPPED = "stopped"  # the console stopped it
    DETACHED = "detached"  # the console let go of it (detach or release); it runs on
    CRASHED = "crashed"  # the watching itself failed


def new_log_path(log_dir: Path, port: int, header: str) -> Path:
    """A fresh ``serve-STAMP-PORT.log`` in ``log_dir``, created with ``header`` (blocking)."""
    private_dir(log_dir)  # 0700: the server logs
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = log_dir / f"serve-{stamp}-{port}.log"
    n = 2
    while path.exists():
        path = log_dir / f"serve-{stamp}-{port}-{n}.log"
        n += 1
    path.write_text(header + "\n", encoding="utf-8")
    return path


def model_listed(flags: ServeFlags, names: list[str]) -> bool:
    """Whether ``/v1/models`` lists the model ``flags`` serve."""
    if any(a.replace("_", "-").startswith("--served-model-name") for a in flags.extra_args):
        return bool(names)  # names given in pass-through args: any listed model will do
    return bool({flags.served_model_name or flags.model} & set(names))


def _cannot_launch(executable: str, exc: OSError) -> Diagnosis:
    return Diagnosis(
        kind="unknown",
        summary=f"cannot launch {executable}: {exc.strerror or exc}",
        facts={"executable": executable, "errno": exc.errno},
        evidence=str(exc),
    )


_WATCH_FAILED = Diagnosis(
    kind="unknown",
    summary="vtc stopped watching the server after an internal error (see vtc's log); "
    "the server was stopped",
    evidence="",
)


def _timeout_diagnosis(found: Diagnosis, timeout_s: float, stage: Stage, last: str) -> Diagnosis:
    facts: dict[str, Any] = {"timeout_s": timeout_s, "stage": stage.value, "last_line": last}
    if found.kind != "unknown":
        return found.model_copy(update={"facts": {**found.facts, **facts}})
    return Diagnosis(
        kind="unknown",
        summary=f"not ready after {timeout_s:g} s: stuck in stage '{stage.value}'",
        facts=facts,
        evidence=last,
    )


class LaunchedServer(LaunchedRecord):
    """One ``vllm serve`` (or simulator) process this console launched and watches: the
    lifecycle task, the console's requests and how each end is carried out."""

    # -- the console's requests -------------------------------------------------------------
    async def begin(self) -> None:
        """Start the lifecycle; returns once launched or refused (then ``Failed`` said why)."""
        self._start(self._run, "vtc-launched-server")
        await asyncio.shield(self._launched)

    async def stop(self) -> None:
        """Stop it and its whole tree; ``Exited(requested=True)`` unless it had ended.

        Returns once the tree is gone, also when it ended on its own meanwhile (its
        leftovers are cleared first). Safe to call more than once.
        """
        if self._task is not None:
            self._ask(Request.STOP)
            await self._finished()

    async def detach(self) -> bool:
        """Stop watching and leave it running; ``False`` when there is nothing to leave."""
        if self._task is None or self._task.done():
            return False
        won = self._ask(Request.DETACH)
        end = await self._finished()
        return won is Request.DETACH and end is End.DETACHED

    # -- the lifecycle ----------------------------------------------------------------------
    async def _run(self) -> End:
        try:
            if not await self._launch():
                return End.REFUSED
            end = await self._starting()
            if end is End.READY:
                end = await self._serving()
            return await self._conclude(end)
        finally:
            if not self._launched.done():
                self._launched.set_result(None)
            self._settle()
            self._let_go()

    async def _launch(self) -> bool:
        self._set_state(ServerState.STARTING)
        flags, port = self._flags, self._flags.effective_port
        if await asyncio.to_thread(port_is_busy, flags.host, port):
            holder = await asyncio.to_thread(port_holder, port)
            why = f"port {port} already in use before launch (checked by vtc, nothing launched)"
            diagnosis = port_in_use_diagnosis(port, why, holder=holder)
            return self._refuse(diagnosis)
        header = f"# vtc: {shlex.join(self._argv)}"
        self._log_path = await asyncio.to_thread(new_log_path, self._settings.log_dir, port, header)
        self._t0 = time.monotonic()
        self._started_at = datetime.now(UTC)
        try:
            self._proc = await ServerProcess.start(
                self._argv, self._env, self._log_path, self._on_line, self._on_started
            )
        except OSError as exc:
            note = f"[vtc] cannot launch {self._argv[0]}: {exc}"
            self._log.append(note)
            await asyncio.to_thread(append_note, str(self._log_path), note)
            return self._refuse(_cannot_launch(self._argv[0], exc))
        self._launched.set_result(None)
        await asyncio.to_thread(self._remember_tree, self._proc.pid)
        return True

    def _on_started(self, pid: int) -> None:
        """Spawned: announced before its first line can arrive."""
        self._emit(Launched(pid=pid, argv=self._argv, log_path=str(self._log_path)))
        marked = self._tracker.mark(Stage.LAUNCHING, 0.0)
        if marked is not None:
            self._emit(marked)

    def _refuse(self, diagnosis: Diagnosis) -> bool:
        self._set_state(ServerState.FAILED)
        self._emit(Failed(elapsed=0.0, exit_code=None, diagnosis=diagnosis))
        return False

    def _on_line(self, line: str) -> None:
        stored = self._log.append(line)
        self._emit(LogLine(text=stored))
        for event in self._tracker.feed(stored, self.elapsed()):
            self._emit(event)
            api_up = isinstance(event, StageReached) and event.stage is Stage.API_UP
            if api_up and not self._api_up.done():
                self._api_up.set_result(None)

    def _first_end(self) -> End | None:
        """The end that happened first (the exit, or the console's request), if any."""
        exit_at = self._proc.exited_at if self._proc is not None else None
        request, request_at = self._requested(), self._request_at
        if exit_at is not None and (request_at is None or exit_at <= request_at):
            return End.EXITED
        if request is None:
            return None
        return End.STOPPED if request is Request.STOP else End.DETACHED

    async def _starting(self) -> End:
        assert self._proc is not None
        exited, request = self._proc.exited, self._requests()
        while True:
            end = self._first_end()
            if end is not None:
                return end
            if self.elapsed() >= self._startup_timeout_s:
                return End.TIMED_OUT
            await asyncio.to_thread(self._remember_tree, self._proc.pid)
            probe = asyncio.ensure_future(self._probe_ready(self._proc.pid))
            await wait_first(probe, exited, request)
            if not probe.done():
                await cancel_and_wait(probe)
            elif probe.result() and self._first_end() is None:
                self._on_ready()
                return End.READY
            if self._first_end() is None:
                await self._poll_pause()

    async def _poll_pause(self) -> None:
        """One poll interval, cut short by the exit, a request or the API-up log line."""
        assert self._proc is not None
        poll, exited, request = self._settings.poll_interval_s, self._proc.exited, self._requests()
        if self._api_up.done():  # listening within moments: poll fast until it answers
            await wait_first(exited, request, timeout_s=min(poll, POLL_AFTER_API_UP_S))
        else:
            await wait_first(exited, request, self._api_up, timeout_s=poll)

    async def _probe_ready(self, root: int) -> bool:
        url, port = self.base_url, self._flags.effective_port
        if await self._prober.health(url) != 200:
            return False
        names = await self._prober.models(url)
        if names is not None and not model_listed(self._flags, names):
            return False

        def stranger() -> bool:
            ours = self.pids() | {info.pid for info in snapshot_tree(root)}
            return held_by_stranger(port, ours)

        return not await asyncio.to_thread(stranger)

    def _on_ready(self) -> None:
        elapsed = self.elapsed()
        self._set_state(ServerState.READY)
        marked = self._tracker.mark(Stage.READY, elapsed)
        if marked is not None:
            self._emit(marked)
        kv = self._tracker.kv_cache
        self._emit(
            Ready(
                elapsed=elapsed,
                kv_cache_tokens=kv.tokens if kv else None,
                max_concurrency=kv.max_concurrency if kv else None,
            )
        )

    async def _serving(self) -> End:
        assert self._proc is not None
        exited, request = self._proc.exited, self._requests()
        watch = HealthWatch(
            self._prober, self.base_url, self._emit, interval_s=self._settings.health_interval_s
        )
        health = asyncio.ensure_future(watch.run())
        try:
            while True:
                await asyncio.to_thread(self._remember_tree, self._proc.pid)  # as it serves
                await wait_first(exited, request, timeout_s=SERVING_SNAPSHOT_S)
                end = self._first_end()
                if end is not None:
                    return end
        finally:
            await cancel_and_wait(health)

    async def _conclude(self, end: End) -> End:
        if end is End.EXITED:
            assert self._proc is not None
            await self._on_exit(self._proc.exited.result())
        elif end is End.TIMED_OUT:
            await self._on_timeout()
        elif end is End.STOPPED:
            await self._on_stop()
        elif end is End.DETACHED:
            await self._on_detach()
        return end

    async def _log_at_end(self) -> str:
        """The log as it stands now, every line written before this moment included."""
        assert self._proc is not None
        await self._proc.sync(SYNC_S)
        return self._log.text()

    async def _clear_tree(self) -> int | None:
        """Kill what is left of the tree, then read the rest of its output; the exit code."""
        assert self._proc is not None
        report = await self._terminate(self._proc.pid, self._proc.pid, str(self._log_path))
        # With survivors (SIGKILL not yet effective) the pipe stays open: do not wait on it.
        return await self._proc.finish(AFTER_KILL_S if report.clean else SURVIVOR_WAIT_S)

    async def _on_exit(self, code: int) -> None:
        elapsed, starting = self.elapsed(), self._state is ServerState.STARTING
        self._exit_code = code
        # The cause is in what the server wrote before it exited; what its orphans write
        # when the teardown below signals them is the console's doing, not the cause.
        text = await self._log_at_end()
        diagnosis = await _diagnose(text, self._flags, code, self._settings.fix_check)
        failed = starting or diagnosis.kind != "unknown" or code != 0
        if failed:
            # The card at once; the start counts as settled once the tree is gone, so a
            # caller that waits for it never relaunches beside orphans still holding memory.
            self._set_state(ServerState.FAILED, settle=False)
            self._emit(Failed(elapsed=elapsed, exit_code=code, diagnosis=diagnosis))
        else:
            self._set_state(ServerState.STOPPING)
        # The API server is gone; its EngineCore/Worker may not be (orphans keep memory).
        await self._clear_tree()
        self._settle()
        if not starting:
            self._set_state(ServerState.FAILED if failed else ServerState.STOPPED)
            self._emit(Exited(exit_code=code, requested=False))

    async def _on_timeout(self) -> None:
        elapsed, stage = self.elapsed(), self._tracker.current
        text = await self._log_at_end()
        last = next((line for line in reversed(self._log.lines()) if line.strip()), "")
        self._set_state(ServerState.STOPPING)
        self._exit_code = await self._clear_tree()
        found = await _diagnose(text, self._flags, None, self._settings.fix_check)
        diagnosis = _timeout_diagnosis(found, self._startup_timeout_s, stage, last)
        self._set_state(ServerState.FAILED)
        self._emit(Failed(elapsed=elapsed, exit_code=self._exit_code, diagnosis=diagnosis))

    async def _on_stop(self) -> None:
        self._set_state(ServerState.STOPPING)
        self._exit_code = await self._clear_tree()
        self._set_state(ServerState.STOPPED)
        self._emit(Exited(exit_code=self._exit_code, requested=True))

    async def _on_detach(self) -> None:
        self._let_go()
        note = f"[vtc] detached: the log goes on here (relay pid {self.relay_pid})"
        self._log.append(note)
        await asyncio.to_thread(append_note, str(self._log_path), note)

    def _let_go(self) -> None:
        """Stop reading and watching; the processes run on (idempotent)."""
        if self._proc is not None:
            self._proc.let_go()

    async def _on_crash(self) -> None:
        if self._state in (ServerState.FAILED, ServerState.STOPPED):
            return
        if self.pid is not None:
            with contextlib.suppress(Exception):  # best effort: the watching already failed
                await self._terminate(self.pid, self.pid, str(self._log_path))
        self._set_state(ServerState.FAILED)
        failed = Failed(elapsed=self.elapsed(), exit_code=self._exit_code, diagnosis=_WATCH_FAILED)
        self._emit(failed)


async def _diagnose(
    text: str, flags: ServeFlags, code: int | None, check: FixChecker | None
) -> Diagnosis:
    """The cause in ``text``, each fix checked against pre-flight (off the event loop)."""
    return await asyncio.to_thread(diagnose, text, flags=flags, exit_code=code, check=check)
