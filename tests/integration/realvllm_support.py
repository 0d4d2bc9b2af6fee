"""Helpers for the real-vLLM integration suite: events, ports, process trees, flags.

Kept free of fixtures so the test modules can share them; the fixtures are in conftest.py.
Every wait here is bounded and fails with the server's log tail, so a hung or dying server
shows why in the test report instead of stalling CI.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx
import psutil
from fakes.real_vllm import SETTLE_GUARD_S, STARTUP_GUARD_S
from fakes.supervisor import Supervisor

from tui.domain.events import LogLine, ServerEvent, ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.telemetry import ServerMetrics, SourceStatus
from tui.domain.workload import LoadProgress
from tui.server.launcher import with_default_host
from tui.server.provision import ProvisionedVllm
from tui.telemetry.vllm_metrics import VllmMetricsSource

MIB = 2**20
KV_64M = 64 * MIB
# vllm-cpu-findings.md: always pass a KV size on CPU, never reach the hub.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1"}
# A good start takes ~21 s on an idle 2-core machine, the slowest failure ~45 s; both take
# minutes when the machine is shared. Only a hang ever waits this long.
STARTUP_TIMEOUT_S = STARTUP_GUARD_S
SETTLE_WAIT_S = SETTLE_GUARD_S  # the supervisor's own timeout must fire first
# What a test waits on is an event or the server's own counters; these bounds only turn a
# hung server or client into a failure with a message instead of a stalled CI. None of
# them is a speed a busy machine has to reach: on two cores shared with other work a
# /metrics answer has taken over 5 s and a 512-token load over a minute.
HANG_S = 600.0
SCRAPE_GUARD_S = 60.0
CPU_BLOCK_SIZE = 128  # vLLM's default block size on CPU (platforms/cpu.py:292-293)

E = TypeVar("E")


class EventRecorder:
    """An ``on_event`` callback that keeps every event with the monotonic time it arrived."""

    def __init__(self) -> None:
        self.timed: list[tuple[float, ServerEvent]] = []

    def __call__(self, event: ServerEvent) -> None:
        self.timed.append((time.monotonic(), event))

    def clear(self) -> None:
        """Forget what was recorded (before the same supervisor starts again)."""
        self.timed.clear()

    @property
    def events(self) -> list[ServerEvent]:
        """Every event, in order."""
        return [event for _, event in self.timed]

    def lifecycle(self) -> list[ServerEvent]:
        """Every event except ``LogLine`` (the lifecycle), in order."""
        return [event for event in self.events if not isinstance(event, LogLine)]

    def of(self, kind: type[E]) -> list[E]:
        """The events of type ``kind``, in order."""
        return [event for event in self.events if isinstance(event, kind)]

    def time_of(self, kind: type[object]) -> float | None:
        """When the first event of type ``kind`` arrived (monotonic), if one did."""
        return next((t for t, event in self.timed if isinstance(event, kind)), None)

    async def wait_for(self, kind: type[E], timeout_s: float, sup: Supervisor | None = None) -> E:
        """The first event of type ``kind``, waiting at most ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = self.of(kind)
            if found:
                return found[0]
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"no {kind.__name__} within {timeout_s:g} s; events: "
                    f"{[type(e).__name__ for e in self.lifecycle()]}{log_tail(sup)}"
                )
            await asyncio.sleep(0.05)


def log_tail(sup: Supervisor | None, n: int = 40) -> str:
    """The last ``n`` lines of the supervisor's log, for assertion messages."""
    if sup is None:
        return ""
    return "\n--- server log tail ---\n" + "\n".join(sup.log_lines.tail(n))


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _ephemeral_low() -> int:
    """The lowest port the kernel hands to outgoing connections (Linux's default 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port that nothing holds right now, below the kernel's ephemeral range.

    vLLM binds its port seconds after launch (its imports first). A port the OS picked
    (``bind(0)``) is an ephemeral one, which any outgoing connection meanwhile (the
    supervisor's own /health probes) may take as its local port: CI saw the port_in_use
    fix's ``P + 1`` fail with EADDRINUSE that way. Below the range only an explicit bind
    can hold a port, and the check sees those."""
    top = _ephemeral_low() - 2  # P + 1 stays below the range too (free_port_pair)
    pick = random.SystemRandom()
    for _ in range(200):
        port = pick.randrange(20000, top)
        if _port_free(port):
            return port
    raise AssertionError(f"no free port from 20000 to {top}")


def free_port_pair() -> int:
    """A port P such that P and P + 1 are both free (the port_in_use fix proposes P + 1)."""
    for _ in range(50):
        port = free_port()
        if port < 65535 and _port_free(port + 1):
            return port
    raise AssertionError("could not find two adjacent free ports")


def good_flags(real_vllm: ProvisionedVllm, **changes: object) -> ServeFlags:
    """The known-good CPU configuration (vllm-cpu-findings.md), on a free port."""
    flags = ServeFlags(
        model=str(real_vllm.model),
        enforce_eager=True,
        kv_cache_memory_bytes=KV_64M,
        max_model_len=2048,
        port=free_port(),
    )
    return flags.replace(**changes) if changes else flags


def kv_bytes_per_token(model_dir: Path) -> int:
    """K and V bytes per token of a model, from its config.json (reference section 2).

    2 (K and V) x layers x KV heads x head size x bytes per element of the checkpoint's
    dtype (``kv_cache_dtype auto``): bfloat16 for the provisioned tiny models.
    """
    config = json.loads((model_dir / "config.json").read_text())
    heads = int(config["num_attention_heads"])
    head_dim = int(config.get("head_dim") or config["hidden_size"] // heads)
    kv_heads = int(config.get("num_key_value_heads") or heads)
    dtype = str(config.get("dtype") or config.get("torch_dtype") or "bfloat16")
    element = {"bfloat16": 2, "float16": 2, "float32": 4}[dtype]
    return 2 * int(config["num_hidden_layers"]) * kv_heads * head_dim * element


def max_position_embeddings(model_dir: Path) -> int:
    """The model's context length from its config.json."""
    return int(json.loads((model_dir / "config.json").read_text())["max_position_embeddings"])


def make_supervisor(
    real_vllm: ProvisionedVllm,
    log_dir: Path,
    recorder: EventRecorder,
    *,
    env: dict[str, str] | None = None,
    grace_s: float = 10.0,
    startup_timeout_s: float = STARTUP_TIMEOUT_S,
) -> Supervisor:
    """A supervisor of the provisioned ``vllm`` executable, offline, logging to ``log_dir``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    return Supervisor(
        command=[str(real_vllm.vllm)],
        env={**OFFLINE_ENV, **(env or {})},
        log_dir=log_dir,
        on_event=recorder,
        startup_timeout_s=startup_timeout_s,
        grace_s=grace_s,
        poll_interval_s=0.25,
    )


async def settle(sup: Supervisor) -> str:
    """Wait (bounded) until the start is decided; returns the state's value."""
    try:
        state = await sup.wait_settled(SETTLE_WAIT_S)
    except TimeoutError as exc:
        message = f"start not decided within {SETTLE_WAIT_S:g} s{log_tail(sup)}"
        raise AssertionError(message) from exc
    return state.value


# -- process trees ---------------------------------------------------------------------------
def tree(pid: int) -> list[psutil.Process]:
    """``pid`` and its descendants now (psutil objects remember their creation time)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def alive(procs: Iterable[psutil.Process]) -> list[psutil.Process]:
    """Those of ``procs`` still running (same PID *and* creation time; zombies count as gone)."""
    left = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                left.append(proc)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return left


def group_alive(pgid: int) -> list[int]:
    """PIDs of live processes in process group ``pgid`` (the server runs in its own)."""
    pids = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                pids.append(proc.pid)
        except (ProcessLookupError, PermissionError, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return pids


async def exit_time(pid: int, timeout_s: float) -> float | None:
    """When process ``pid`` ended (monotonic), polled every 50 ms; None if it outlived us."""
    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return time.monotonic()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive([proc]):
            return time.monotonic()
        await asyncio.sleep(0.05)
    return None


async def wait_gone(procs: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Wait up to ``timeout_s`` for every process to end; returns those still alive."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = alive(procs)
        if not left or time.monotonic() >= deadline:
            return left
        await asyncio.sleep(0.1)


def describe(procs: Iterable[psutil.Process]) -> str:
    """``pid name cmdline`` of each process, for assertion messages."""
    out = []
    for proc in procs:
        try:
            out.append(f"{proc.pid} {proc.name()} {' '.join(proc.cmdline())[:120]}")
        except psutil.Error:
            out.append(f"{proc.pid} (gone)")
    return "; ".join(out)


def assert_nothing_left(sup: Supervisor | None, seen: Iterable[psutil.Process], pgid: int) -> None:
    """No process of the server's tree is alive: what we saw, what it saw, and its group."""
    procs = {(p.pid, p.create_time()): p for p in alive(seen)}
    for info in sup.known_processes if sup is not None else []:
        try:
            proc = psutil.Process(info.pid)
            if abs(proc.create_time() - info.create_time) < 0.01:
                procs[(proc.pid, proc.create_time())] = proc
        except psutil.NoSuchProcess:
            continue
    left = alive(procs.values())
    assert not left, f"processes of the server tree survived: {describe(left)}"
    assert not group_alive(pgid), f"processes left in group {pgid}: {group_alive(pgid)}"


# -- HTTP ------------------------------------------------------------------------------------
def local_client(timeout_s: float = 5.0) -> httpx.AsyncClient:
    """An HTTP client that never goes through a proxy from the environment."""
    return httpx.AsyncClient(trust_env=False, timeout=timeout_s)


@asynccontextmanager
async def metrics_source(base_url: str) -> AsyncIterator[VllmMetricsSource]:
    """The product's /metrics source on the server at ``base_url``, for tests that read the
    server's counters: its scrape deadline is a hang guard, not the console's 3 s (a busy
    machine answers later; a late answer is not what these tests are about)."""
    async with local_client(SCRAPE_GUARD_S) as client:
        yield VllmMetricsSource(base_url + "/metrics", client, timeout_s=SCRAPE_GUARD_S)


async def sample_until(
    source: VllmMetricsSource,
    done: Callable[[ServerMetrics], bool],
    what: str,
    guard_s: float = HANG_S,
) -> ServerMetrics:
    """Scrape until a sample is OK and ``done(sample)`` holds: the server's own counters and
    gauges, which vLLM updates as responses finish, a moment after the client saw them.
    A failed scrape keeps ``source``'s previous good one, so rates span the gap."""
    deadline = time.monotonic() + guard_s
    while True:
        sample = await source.sample()
        if sample.status is SourceStatus.OK and done(sample):
            return sample
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not reached within {guard_s:g} s; last: {sample}")
        await asyncio.sleep(0.25)


async def served_max_model_len(base_url: str) -> int:
    """``max_model_len`` of the (single) model ``/v1/models`` lists."""
    async with local_client() as client:
        response = await client.get(base_url + "/v1/models")
    response.raise_for_status()
    return int(response.json()["data"][0]["max_model_len"])


# -- load ------------------------------------------------------------------------------------
async def wait_streaming(
    progress: list[LoadProgress], in_flight: int, task: asyncio.Task[object], timeout_s: float
) -> LoadProgress:
    """Wait until the load reports ``in_flight`` open streams that deliver tokens.

    Judged from the client's own progress: on two busy cores vLLM's /metrics can answer
    seconds late while it streams, long after the state it would show is gone.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        if progress and progress[-1].in_flight >= in_flight and progress[-1].output_tokens_per_s:
            return progress[-1]
        if task.done():
            raise AssertionError(f"the load ended before {in_flight} streams were open: {task}")
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"{in_flight} streams not open within {timeout_s:g} s: "
                f"{progress[-1] if progress else 'no progress'}"
            )
        await asyncio.sleep(0.05)


# -- servers shared between tests --------------------------------------------------------------
POOL_GRACE_S = 3.0
"""The stop grace of a server kept for a later test (the loop's last test stops its server
under load and bounds the stop by this grace)."""


@dataclass
class Kept:
    """A ready server a test has finished with, and what it recorded since its start."""

    sup: Supervisor
    recorder: EventRecorder
    flags: ServeFlags
    grace_s: float

    @property
    def base_url(self) -> str:
        """Where the server answers."""
        return self.sup.base_url


def _flag_set(flags: ServeFlags) -> ServeFlags:
    """``flags`` without the port: two starts of one flag set on two ports are alike."""
    return flags.model_copy(update={"port": None})


class ServerPool:
    """Ready servers kept for a later test of the same flag set: one start, two tests.

    A test whose point is a start (a fix that must start, say) keeps the ready server it
    started here; a later test that only needs a ready server of those flags takes it, and
    owns it from then on (it may stop it). Servers never taken stop at the session's end.
    """

    def __init__(self) -> None:
        self._kept: list[Kept] = []

    def keep(self, sup: Supervisor, recorder: EventRecorder, grace_s: float) -> None:
        """Keep ``sup``'s ready server (its start's events in ``recorder``) for a later test."""
        assert sup.state is ServerState.READY and sup.flags is not None, sup.state
        self._kept.append(Kept(sup, recorder, sup.flags, grace_s))

    def holds(self, sup: Supervisor) -> bool:
        """Whether ``sup`` is kept here (its test must not stop it)."""
        return any(k.sup is sup for k in self._kept)

    def take(self, flags: ServeFlags, grace_s: float) -> Kept | None:
        """A kept server of ``flags`` (any port) stopping with ``grace_s``, still ready;
        ``None``: none, start one."""
        for kept in self._kept:
            # What its launcher would launch for ``flags`` (the default host filled in, as
            # the kept server's own flags have it).
            launched = with_default_host(flags, (), kept.sup.launcher.default_host)
            if kept.grace_s == grace_s and _flag_set(kept.flags) == _flag_set(launched):
                self._kept.remove(kept)
                if kept.sup.state is ServerState.READY:
                    return kept
                self._kept.append(kept)  # it ended meanwhile: closed with the rest
        return None

    async def aclose(self) -> None:
        """Stop every server still kept."""
        kept, self._kept = self._kept, []
        for k in kept:
            await k.sup.aclose()


class SupervisorFactory:
    """The ``supervisors`` fixture: ``make(env=None, grace_s=10.0) -> (Supervisor,
    EventRecorder)`` makes supervisors of the real ``vllm``; :meth:`ready` gives a ready
    server of a flag set, kept by an earlier test or started; :meth:`keep` leaves one for a
    later test. Every server made or taken here that is not kept stops at teardown, so a
    failing test never leaves a server behind."""

    def __init__(self, real_vllm: ProvisionedVllm, log_dir: Path, pool: ServerPool) -> None:
        self._real_vllm = real_vllm
        self._log_dir = log_dir
        self._pool = pool
        self._owned: list[Supervisor] = []

    def __call__(
        self, *, env: dict[str, str] | None = None, grace_s: float = 10.0
    ) -> tuple[Supervisor, EventRecorder]:
        recorder = EventRecorder()
        log_dir = self._log_dir / f"logs-{len(self._owned)}"
        sup = make_supervisor(self._real_vllm, log_dir, recorder, env=env, grace_s=grace_s)
        self._owned.append(sup)
        return sup, recorder

    def keep(self, sup: Supervisor, recorder: EventRecorder) -> None:
        """Leave ``sup``'s ready server (made with ``grace_s=POOL_GRACE_S``) to a later test
        of the same flags, which then owns it."""
        self._pool.keep(sup, recorder, POOL_GRACE_S)

    async def ready(self, flags: ServeFlags) -> Kept:
        """A ready server of ``flags``' flag set (any port): one an earlier test kept, else
        one started here; this test owns it."""
        kept = self._pool.take(flags, POOL_GRACE_S)
        if kept is not None:
            self._owned.append(kept.sup)
            return kept
        sup, recorder = self(grace_s=POOL_GRACE_S)
        await sup.start(flags)
        state = await settle(sup)
        assert state == "ready", f"{flags.to_argv()} did not start: {state}{log_tail(sup)}"
        return Kept(sup, recorder, flags, POOL_GRACE_S)

    async def aclose(self) -> None:
        """Stop every server made or taken here that no later test was left."""
        for sup in self._owned:
            if not self._pool.holds(sup):
                await sup.aclose()
