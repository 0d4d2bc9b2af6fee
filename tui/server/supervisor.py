"""``Supervisor``: owns one ``vllm serve`` (or ``vtc-sim serve``) process at a time.

It launches the server in its own session and process group, reads its merged
stdout/stderr line by line into a :class:`LogBuffer` (ring + file) while turning lines into
events, decides readiness, diagnoses failures, and stops the whole process tree.

Events, in order, for one start (``on_event`` receives each):

- pre-launch port check fails: ``Failed(port_in_use)`` only; nothing is launched.
- launched: ``Launched``, ``StageReached(LAUNCHING)``, then ``LogLine`` per line, with
  ``StageReached``/``KvCacheReported`` as the log shows them.
- ready: ``StageReached(READY)``, ``Ready``. Readiness is: our own process alive AND
  ``/health`` answers 200 AND (when the prober can list models) ``/v1/models`` lists the
  model; plus no process outside our tree is the one listening on the port.
- exit before ready: ``Failed(diagnose(log, flags, exit_code))`` as soon as the process
  exits (not at a timeout), after any leftover children are killed.
- no ready within ``startup_timeout_s``: the tree is killed, then ``Failed`` of kind
  ``unknown`` naming the stage it was stuck in (or the log's own diagnosis if it has one).
- exit on its own after ready: ``Failed`` first when the exit looks like a failure (the log
  diagnoses to a known kind, or the exit code is not 0; vLLM exits 0 when its engine died,
  so the log decides too), then ``Exited(requested=False)``. State ends FAILED or STOPPED.
- ``stop()``: ``Exited(requested=True)``; state STOPPED.

Secrets (``VLLM_API_KEY``, ``HF_TOKEN``...) travel in ``env`` only, never in argv, and
their values are redacted from every stored log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import shlex
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import httpx
import psutil

from tui.domain.diagnosis import Diagnosis
from tui.domain.events import (
    Exited,
    Failed,
    Launched,
    LogLine,
    Ready,
    ServerEvent,
    ServerState,
    Stage,
    StageReached,
)
from tui.domain.flags import ServeFlags
from tui.domain.secrets import MIN_SECRET_LEN, SECRET_NAME
from tui.server.diagnose import diagnose, port_in_use_diagnosis
from tui.server.logbuffer import DEFAULT_MAX_LINES, LogBuffer, clean_line
from tui.server.process import ProcessInfo, TerminationReport, snapshot_tree, terminate_tree
from tui.server.stages import StageTracker

logger = logging.getLogger(__name__)

_SECRET_KEY = SECRET_NAME  # declared once, in tui.domain.secrets
_MIN_SECRET_LEN = MIN_SECRET_LEN
_READ_LIMIT = 1 << 20  # vLLM's engine-config line is long; 1 MiB per line is plenty
_DRAIN_S = 1.0  # how long to wait for the rest of the output after the process exits
_READY_SNAPSHOT_EVERY_S = 1.0  # a tree snapshot costs ~1 ms per 100 processes on the host


class _ServerProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """The stream protocol of ``create_subprocess_exec`` plus an exit future.

    Python 3.11's ``Process.wait()`` returns only once every pipe is closed, and an orphaned
    EngineCore keeps the inherited stdout open: waiting on it would hang exactly when the
    API server died alone. ``exited`` resolves when the process itself exits.
    """

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


class HealthProber(Protocol):
    """How the supervisor asks a server whether it is up (a fake replaces it in tests).

    Both methods take the server's base URL (``http://127.0.0.1:8000``) and never raise:
    ``None`` means "no answer" (connection refused, timeout) or "cannot tell".
    """

    async def health(self, url: str) -> int | None:
        """The HTTP status of ``GET {url}/health``, or ``None`` without an answer."""
        ...

    async def models(self, url: str) -> list[str] | None:
        """The model ids ``GET {url}/v1/models`` lists, or ``None`` if it cannot tell."""
        ...


class HttpxProber:
    """The real prober: ``httpx.AsyncClient`` with a short timeout, proxies ignored."""

    def __init__(self, *, api_key: str | None = None, timeout_s: float = 2.0) -> None:
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout_s
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            # trust_env=False: an HTTP(S)_PROXY in the environment must not intercept localhost.
            self._client = httpx.AsyncClient(
                timeout=self._timeout, trust_env=False, headers=self._headers
            )
        return self._client

    async def health(self, url: str) -> int | None:
        """``GET /health``; its status, or ``None`` when nothing answers."""
        try:
            response = await self._http().get(url.rstrip("/") + "/health")
        except httpx.HTTPError:
            return None
        return response.status_code

    async def models(self, url: str) -> list[str] | None:
        """The ``id`` of each entry of ``GET /v1/models``; ``None`` on any other answer."""
        try:
            response = await self._http().get(url.rstrip("/") + "/v1/models")
            if response.status_code != 200:
                return None  # e.g. 401 with an API key we were not given: cannot tell
            data = response.json().get("data", [])
            return [str(entry["id"]) for entry in data if isinstance(entry, dict) and "id" in entry]
        except (httpx.HTTPError, ValueError, AttributeError, KeyError, TypeError):
            return None

    async def aclose(self) -> None:
        """Close the HTTP client."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def client_host(host: str | None) -> str:
    """The address a local client uses to reach a server bound to ``host``."""
    if host in (None, "", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host


def port_is_busy(host: str | None, port: int) -> bool:
    """True if something already listens on (or holds) ``port`` where the server would bind.

    A connect that succeeds means a listener (someone else's ``/health`` would answer);
    a failing bind with EADDRINUSE means a socket holds the port without listening yet (a
    vLLM still starting binds first and listens late, reference section 6).
    """
    target = client_host(host)
    try:
        with socket.create_connection((target, port), timeout=0.5):
            return True
    except OSError:
        pass
    bind_host = host or "0.0.0.0"
    family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((bind_host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def _listening_on(conn: Any, port: int) -> bool:
    """True for a TCP connection entry (psutil's) that listens on ``port``."""
    return bool(conn.laddr) and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN


def _listener_pids(port: int) -> list[int | None] | None:
    """PIDs of the processes listening on TCP ``port`` (``None`` where the OS hides one).

    ``None`` as a whole when the connection table cannot be read.
    """
    try:
        return [c.pid for c in psutil.net_connections(kind="tcp") if _listening_on(c, port)]
    except (psutil.AccessDenied, OSError):
        return None


# After the log's "Starting vLLM server on" the socket listens within milliseconds: probing
# this often until it answers keeps /health-200-to-Ready well under the 0.3 s goal.
_POLL_AFTER_API_UP_S = 0.05


def _tree_listens(pids: set[int], port: int) -> bool:
    """True when one of ``pids`` has a TCP socket listening on ``port``."""
    for pid in pids:
        try:
            conns = psutil.Process(pid).net_connections(kind="tcp")
        except (psutil.Error, OSError):
            continue
        if any(_listening_on(c, port) for c in conns):
            return True
    return False


def port_holder(port: int) -> str | None:
    """``"pid N (name)"`` of the process listening on ``port`` when the OS tells us."""
    for pid in _listener_pids(port) or []:
        if pid:
            try:
                return f"pid {pid} ({psutil.Process(pid).name()})"
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                return f"pid {pid}"
    return None


class Supervisor:
    """Launches, watches and stops one server process at a time (asyncio).

    ``command`` is the executable prefix (``["vllm"]``, ``["/venv/bin/vllm"]``,
    ``["vtc-sim"]``); the argv is ``[*command, "serve", *flags.to_argv(), *extra]``.
    ``env`` is merged over ``os.environ`` and is where secrets go. ``http`` probes
    readiness (default :class:`HttpxProber`, with ``VLLM_API_KEY`` from the merged env).
    See the module docstring for the events and their order.
    """

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str] | None,
        log_dir: Path,
        on_event: Callable[[ServerEvent], None],
        http: HealthProber | None = None,
        *,
        startup_timeout_s: float = 900,
        grace_s: float = 10,
        poll_interval_s: float = 0.25,
        max_log_lines: int = DEFAULT_MAX_LINES,
    ) -> None:
        if isinstance(command, str) or not command:
            raise ValueError("command must be a non-empty argv list, e.g. ['vllm']")
        if startup_timeout_s <= 0 or grace_s < 0 or poll_interval_s <= 0:
            raise ValueError("startup_timeout_s and poll_interval_s must be > 0, grace_s >= 0")
        self._command = tuple(command)
        self._env = dict(env or {})
        self._log_dir = Path(log_dir)
        self._on_event = on_event
        self._own_http = http is None
        merged = self._merged_env()
        self._http: HealthProber = http or HttpxProber(api_key=merged.get("VLLM_API_KEY"))
        self._startup_timeout_s = startup_timeout_s
        self._grace_s = grace_s
        self._poll_s = poll_interval_s
        self._max_log_lines = max_log_lines

        self._state = ServerState.IDLE
        self._flags: ServeFlags | None = None
        self._argv: tuple[str, ...] = ()
        self._proc: asyncio.subprocess.Process | None = None
        self._transport: asyncio.SubprocessTransport | None = None
        self._exited: asyncio.Future[None] | None = None
        self._pgid: int | None = None
        self._t0 = 0.0
        self._started_at: datetime | None = None
        self._log = LogBuffer(max_lines=max_log_lines)
        self._tracker = StageTracker()
        # Set when the log says the API server is up: probe at once, not at the next poll.
        self._api_up = asyncio.Event()
        self._known: dict[tuple[int, float], ProcessInfo] = {}
        self._reader: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._stopper: asyncio.Task[None] | None = None
        self._exiting = False  # the watcher is handling the process's own exit
        self._stop_requested = False
        self._terminal_emitted = False
        self._exit_code: int | None = None
        self._settled = asyncio.Event()
        self._finished = asyncio.Event()
        self._finished.set()
        self.last_termination: TerminationReport | None = None
        """What the last tree termination found (survivors are logged as a warning)."""

    # -- properties -------------------------------------------------------------------------
    @property
    def state(self) -> ServerState:
        """Where the current (or last) server is in its lifecycle."""
        return self._state

    @property
    def pid(self) -> int | None:
        """The server process's PID (also its process-group id), once launched."""
        return self._proc.pid if self._proc is not None else None

    @property
    def flags(self) -> ServeFlags | None:
        """The flags of the current (or last) start."""
        return self._flags

    @property
    def argv(self) -> tuple[str, ...]:
        """Exactly what was executed (no secrets: they are in the environment)."""
        return self._argv

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (or the bound host) of the current server."""
        if self._flags is None:
            return "http://127.0.0.1:8000"
        host = client_host(self._flags.host)
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self._flags.effective_port}"

    @property
    def log_lines(self) -> LogBuffer:
        """The ring buffer of the current (or last) server's output."""
        return self._log

    @property
    def log_path(self) -> Path | None:
        """The file the current (or last) server's output is appended to."""
        return self._log.path

    @property
    def started_at(self) -> datetime | None:
        """When the current (or last) server was launched (UTC)."""
        return self._started_at

    @property
    def current_stage(self) -> Stage:
        """The startup stage the log showed most recently."""
        return self._tracker.current

    @property
    def exit_code(self) -> int | None:
        """The server's exit code once it has ended (negative: killed by that signal)."""
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

    @property
    def known_processes(self) -> list[ProcessInfo]:
        """Every process seen in the server's tree (kept to find orphans)."""
        return list(self._known.values())

    def elapsed(self) -> float:
        """Seconds since launch."""
        return time.monotonic() - self._t0 if self._t0 else 0.0

    # -- start ------------------------------------------------------------------------------
    async def start(self, flags: ServeFlags, extra_launch_args: Sequence[str] = ()) -> None:
        """Launch ``vllm serve`` with ``flags``; returns once launched (or refused).

        Progress arrives through ``on_event``; :meth:`wait_settled` waits for Ready/Failed.
        Only a validated :class:`ServeFlags` is accepted, so an invalid flag set can never
        reach a launch. Raises ``RuntimeError`` if a server is already running.
        """
        if not isinstance(flags, ServeFlags):
            raise TypeError(f"start() takes ServeFlags, not {type(flags).__name__}")
        if isinstance(extra_launch_args, str):
            raise TypeError("extra_launch_args must be a sequence of arguments, not a string")
        if self._state in (ServerState.STARTING, ServerState.READY, ServerState.STOPPING):
            raise RuntimeError(f"a server is already {self._state.value}; stop it first")
        self._reset(flags)
        self._state = ServerState.STARTING  # set before any await: a second start() is refused
        try:
            await self._launch(flags, extra_launch_args)
        except BaseException:
            if self._proc is None:
                self._state = ServerState.FAILED
            raise

    async def _launch(self, flags: ServeFlags, extra_launch_args: Sequence[str]) -> None:
        port = flags.effective_port
        argv = (*self._command, "serve", *flags.to_argv(), *extra_launch_args)
        self._argv = tuple(argv)

        if await asyncio.to_thread(port_is_busy, flags.host, port):
            holder = await asyncio.to_thread(port_holder, port)
            diagnosis = port_in_use_diagnosis(
                port,
                f"port {port} already in use before launch (checked by vtc, nothing launched)",
                holder=holder,
            )
            self._state = ServerState.FAILED
            self._emit_terminal(Failed(elapsed=0.0, exit_code=None, diagnosis=diagnosis))
            return

        self._log = LogBuffer(
            max_lines=self._max_log_lines,
            path=self._new_log_path(port),
            secrets=self._secrets(),
        )
        self._log.write_file_only(f"# vtc: {shlex.join(argv)}")
        self._t0 = time.monotonic()
        self._started_at = datetime.now(UTC)
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _ServerProtocol(_READ_LIMIT, loop),
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=self._merged_env(),
                start_new_session=True,  # own session and process group: kill the group
            )
        except OSError as exc:
            self._log.append(f"[vtc] cannot launch {argv[0]}: {exc}")
            self._log.close()
            self._state = ServerState.FAILED
            diagnosis = Diagnosis(
                kind="unknown",
                summary=f"cannot launch {argv[0]}: {exc.strerror or exc}",
                facts={"executable": argv[0], "errno": exc.errno},
                evidence=str(exc),
            )
            self._emit_terminal(Failed(elapsed=0.0, exit_code=None, diagnosis=diagnosis))
            return

        proc = asyncio.subprocess.Process(transport, protocol, loop)
        self._proc = proc
        self._transport = transport
        self._exited = protocol.exited
        self._pgid = proc.pid
        self._state = ServerState.STARTING
        self._finished.clear()
        self._remember_tree()
        self._emit(Launched(pid=proc.pid, argv=self._argv, log_path=str(self._log.path)))
        marked = self._tracker.mark(Stage.LAUNCHING, 0.0)
        if marked is not None:
            self._emit(marked)
        self._reader = asyncio.create_task(self._read_output(proc), name="vtc-server-reader")
        self._watcher = asyncio.create_task(
            self._watch(proc, protocol.exited), name="vtc-server-watcher"
        )

    def _reset(self, flags: ServeFlags) -> None:
        self._flags = flags
        self._proc = None
        self._transport = None
        self._exited = None
        self._pgid = None
        self._tracker = StageTracker()
        self._api_up = asyncio.Event()
        self._log = LogBuffer(max_lines=self._max_log_lines)
        self._known = {}
        self._reader = self._watcher = self._stopper = None
        self._exiting = self._stop_requested = self._terminal_emitted = False
        self._exit_code = None
        self._settled = asyncio.Event()
        self._t0 = 0.0
        self._started_at = None
        self.last_termination = None

    def _merged_env(self) -> dict[str, str]:
        merged = dict(os.environ)
        merged.update(self._env)
        # Python children would block-buffer a pipe; the log must arrive as it is written.
        merged.setdefault("PYTHONUNBUFFERED", "1")
        return merged

    def _secrets(self) -> list[str]:
        return [
            value
            for key, value in self._merged_env().items()
            if _SECRET_KEY.search(key) and len(value) >= _MIN_SECRET_LEN
        ]

    def _new_log_path(self, port: int) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = self._log_dir / f"serve-{stamp}-{port}.log"
        n = 2
        while path.exists():
            path = self._log_dir / f"serve-{stamp}-{port}-{n}.log"
            n += 1
        return path

    # -- events -----------------------------------------------------------------------------
    def _emit(self, event: ServerEvent) -> None:
        try:
            self._on_event(event)
        except Exception:  # a broken listener must not break supervision
            logger.exception("on_event raised for %r", type(event).__name__)

    def _emit_terminal(self, event: ServerEvent) -> None:
        self._terminal_emitted = True
        self._emit(event)
        self._settled.set()

    # -- output -----------------------------------------------------------------------------
    async def _read_output(self, proc: asyncio.subprocess.Process) -> None:
        stream = proc.stdout
        assert stream is not None
        while True:
            try:
                raw = await stream.readline()
            except ValueError:  # one line above _READ_LIMIT: asyncio has discarded it
                self._handle_line("[vtc] an over-long output line was dropped")
                continue
            if not raw:
                return
            self._handle_line(clean_line(raw.decode("utf-8", errors="replace")))

    def _handle_line(self, line: str) -> None:
        stored = self._log.append(line)
        self._emit(LogLine(text=stored))
        for event in self._tracker.feed(stored, self.elapsed()):
            self._emit(event)
            if isinstance(event, StageReached) and event.stage is Stage.API_UP:
                self._api_up.set()

    async def _drain(self, timeout_s: float) -> None:
        """Let the reader finish (EOF) for up to ``timeout_s``; orphans may hold the pipe."""
        reader = self._reader
        if reader is None or reader.done():
            return
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(reader), timeout_s)

    async def _finish_reader(self) -> None:
        await self._drain(_DRAIN_S)
        reader = self._reader
        if reader is not None and not reader.done():
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        self._log.close()
        proc, transport = self._proc, self._transport
        if transport is not None and proc is not None and proc.returncode is not None:
            transport.close()  # release the pipe now, not at garbage collection

    # -- watching ---------------------------------------------------------------------------
    def _remember_tree(self) -> None:
        if self._proc is None:
            return
        for info in snapshot_tree(self._proc.pid):
            self._known.setdefault((info.pid, info.create_time), info)

    async def _watch(self, proc: asyncio.subprocess.Process, exited: asyncio.Future[None]) -> None:
        last_snapshot = 0.0
        try:
            while not exited.done():
                now = time.monotonic()
                starting = self._state is ServerState.STARTING
                if starting or now - last_snapshot >= _READY_SNAPSHOT_EVERY_S:
                    await asyncio.to_thread(self._remember_tree)
                    last_snapshot = now
                if self._state is ServerState.STARTING:
                    if self.elapsed() >= self._startup_timeout_s:
                        await self._on_timeout(exited)
                        return
                    probe = asyncio.create_task(self._probe_ready())
                    pending: set[asyncio.Future[Any]] = {probe, exited}
                    await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    if not probe.done():
                        probe.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await probe
                    elif probe.result() and not exited.done():
                        self._on_ready()  # first: the snapshot below is not on the ready path
                        await asyncio.to_thread(self._remember_tree)  # the tree as it serves
                        last_snapshot = time.monotonic()
                    if exited.done():
                        break
                    await self._wait_poll(exited)
                else:
                    await asyncio.wait({exited}, timeout=max(self._poll_s, 1.0))
            self._exiting = True
            code = proc.returncode
            await self._on_exit(code if code is not None else -1)
        finally:
            if not self._stop_requested:  # else stop() sets it once the tree is gone
                self._finished.set()

    async def _wait_poll(self, exited: asyncio.Future[None]) -> None:
        """Sleep one poll interval, cut short by the process's exit or the API-up log line."""
        if self._api_up.is_set():  # listening within moments: poll fast until it answers
            await asyncio.wait({exited}, timeout=min(self._poll_s, _POLL_AFTER_API_UP_S))
            return
        api_up: asyncio.Future[Any] = asyncio.ensure_future(self._api_up.wait())
        waiting: set[asyncio.Future[Any]] = {exited, api_up}
        try:
            await asyncio.wait(waiting, timeout=self._poll_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Cancel, never await: awaiting it under suppress(CancelledError) would swallow
            # a cancel of this watcher that lands meanwhile (stop/detach then wait forever).
            api_up.cancel()

    async def _probe_ready(self) -> bool:
        url = self.base_url
        status = await self._http.health(url)
        if status != 200:
            return False
        assert self._flags is not None
        names = await self._http.models(url)
        if names is not None and not self._model_listed(names):
            return False
        return not await asyncio.to_thread(self._port_held_by_stranger)

    def _model_listed(self, names: list[str]) -> bool:
        assert self._flags is not None
        expected = {self._flags.served_model_name or self._flags.model}
        if any(
            a.replace("_", "-").startswith("--served-model-name") for a in self._flags.extra_args
        ):
            return bool(names)  # names given in pass-through args: any listed model will do
        return bool(expected & set(names))

    def _port_held_by_stranger(self) -> bool:
        """True when a process outside our tree is the one listening on our port."""
        assert self._flags is not None
        port = self._flags.effective_port
        ours = {info.pid for info in list(self._known.values())}  # copy: runs in a thread
        if self._proc is not None:
            ours |= {info.pid for info in snapshot_tree(self._proc.pid)}
        if _tree_listens(ours, port):
            return False  # cheap (a few processes) where the system-wide table costs ~40 ms
        listeners = _listener_pids(port)
        if not listeners:
            return False  # cannot tell, or nobody listens (a fake prober in tests)
        pids = {pid for pid in listeners if pid}
        if not pids:
            return False  # the OS hides the owners: do not block readiness on that
        return not (pids & ours)

    def _on_ready(self) -> None:
        elapsed = self.elapsed()
        self._state = ServerState.READY
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
        self._settled.set()

    async def _terminate(self) -> TerminationReport:
        self._remember_tree()
        report = await asyncio.to_thread(
            terminate_tree, self._pgid, list(self._known.values()), grace_s=self._grace_s
        )
        self.last_termination = report
        if report.survivors:
            names = ", ".join(f"{p.pid} ({p.name})" for p in report.survivors)
            logger.warning("processes survived SIGKILL: %s", names)
            self._log.append(f"[vtc] WARNING: processes survived SIGKILL: {names}")
        return report

    async def _on_timeout(self, exited: asyncio.Future[None]) -> None:
        elapsed = self.elapsed()
        stage = self._tracker.current
        self._state = ServerState.STOPPING
        await self._terminate()
        await asyncio.wait({exited}, timeout=5.0)
        self._exit_code = self._proc.returncode if self._proc is not None else None
        await self._finish_reader()
        text = self._log.text()
        found = await asyncio.to_thread(diagnose, text, flags=self._flags, exit_code=None)
        last = next((line for line in reversed(self._log.lines()) if line.strip()), "")
        facts: dict[str, Any] = {
            "timeout_s": self._startup_timeout_s,
            "stage": stage.value,
            "last_line": last,
        }
        if found.kind != "unknown":
            diagnosis = found.model_copy(update={"facts": {**found.facts, **facts}})
        else:
            diagnosis = Diagnosis(
                kind="unknown",
                summary=f"not ready after {self._startup_timeout_s:g} s: stuck in stage "
                f"'{stage.value}'",
                facts=facts,
                evidence=last,
            )
        self._state = ServerState.FAILED
        self._emit_terminal(Failed(elapsed=elapsed, exit_code=self._exit_code, diagnosis=diagnosis))

    async def _on_exit(self, code: int) -> None:
        elapsed = self.elapsed()
        self._exit_code = code
        # The API server is gone; its EngineCore/Worker may not be (orphans keep memory).
        # Kill those first: while they live they hold the output pipe open.
        await self._terminate()
        await self._finish_reader()
        if self._stop_requested:
            return  # stop() reports
        text = self._log.text()
        # Off the event loop: a long log takes tens of milliseconds to read.
        diagnosis = await asyncio.to_thread(diagnose, text, flags=self._flags, exit_code=code)
        if self._state is ServerState.STARTING:
            self._state = ServerState.FAILED
            self._emit_terminal(Failed(elapsed=elapsed, exit_code=code, diagnosis=diagnosis))
            return
        failed = diagnosis.kind != "unknown" or code != 0
        if failed:
            self._state = ServerState.FAILED
            self._emit(Failed(elapsed=elapsed, exit_code=code, diagnosis=diagnosis))
        else:
            self._state = ServerState.STOPPED
        self._emit_terminal(Exited(exit_code=code, requested=False))

    # -- stop -------------------------------------------------------------------------------
    async def stop(self) -> None:
        """Stop the server: SIGTERM to its group, SIGKILL after ``grace_s``, verify the tree.

        Emits ``Exited(requested=True)`` unless the server had already ended. Safe to call
        at any time and more than once; concurrent calls share one stop.
        """
        if self._proc is None:
            return
        if self._stopper is None:
            self._stopper = asyncio.create_task(self._do_stop(), name="vtc-server-stop")
        await asyncio.shield(self._stopper)

    async def _do_stop(self) -> None:
        proc = self._proc
        assert proc is not None
        self._stop_requested = True
        watcher = self._watcher
        if watcher is not None and not watcher.done():
            if self._exiting or self._state is ServerState.STOPPING:
                # It is handling the process's own end (or a timeout): let it finish.
                await asyncio.shield(watcher)
            else:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
        if not self._terminal_emitted:
            self._state = ServerState.STOPPING
        await self._terminate()
        if self._exited is not None:
            await asyncio.wait({self._exited}, timeout=5.0)
        self._exit_code = proc.returncode
        await self._finish_reader()
        self._finished.set()
        if not self._terminal_emitted:
            self._state = ServerState.STOPPED
            self._emit_terminal(Exited(exit_code=proc.returncode, requested=True))

    # -- waiting and closing ----------------------------------------------------------------
    async def wait_settled(self, timeout_s: float | None = None) -> ServerState:
        """Wait until the start is decided (READY, FAILED or STOPPED); returns the state."""
        await asyncio.wait_for(self._settled.wait(), timeout_s)
        return self._state

    async def wait_finished(self, timeout_s: float | None = None) -> ServerState:
        """Wait until the server process has ended and been handled; returns the state."""
        await asyncio.wait_for(self._finished.wait(), timeout_s)
        return self._state

    async def aclose(self) -> None:
        """Stop any server and close the default HTTP prober."""
        await self.stop()
        if self._own_http and isinstance(self._http, HttpxProber):
            await self._http.aclose()

    async def __aenter__(self) -> Supervisor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
