"""A lane over a console session: the same ``Session`` the operator drives.

A trial is ``session.restart(flags, sweep=tag)`` (a new run on the board, tagged with its
sweep), then the wait for ready or failed from vtc's own supervisor (no 10-minute poll),
then ``session.run_load`` with the sweep's goodput SLOs (they travel with the load; the
result lands on that run). The prefix-cache hit rate over a load is the increase of
``vllm:prefix_cache_hits`` over ``..._queries`` between the telemetry hub's readings of the
server's /metrics before and after (reference section 3; no second scrape);
``/reset_prefix_cache`` is a development endpoint, there only when the server runs with
``VLLM_SERVER_DEV_MODE=1``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Protocol

import httpx

from tui.domain.events import ServerEvent, ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import SweepTag
from tui.domain.telemetry import ServerMetrics
from tui.domain.workload import LoadSpec
from tui.session.port import LaunchWithdrawn, LoadFinished, ServerControl, SessionEvent
from tui.tune.lanes import BenchRun, LaneError, LaneInterrupted, StartResult

SETTLED = {ServerState.READY, ServerState.FAILED, ServerState.STOPPED, ServerState.IDLE}
NO_DEV_MODE = (
    "the prefix cache was not reset: the server has no /reset_prefix_cache (vtc sweep starts "
    "servers with VLLM_SERVER_DEV_MODE=1; in the console, export it before vtc)"
)


STOPPED_BEFORE_START = "the sweep was stopped before the trial's server started"


class SweepTarget(ServerControl, Protocol):
    """What a lane needs of ``tui.session.Session``: the server control, its URL and fresh
    metrics."""

    @property
    def base_url(self) -> str | None: ...
    async def fresh_metrics(self) -> ServerMetrics | None: ...


class SessionLane:
    """Trials on one session's server, one after another."""

    def __init__(
        self,
        session: SweepTarget,
        client: httpx.AsyncClient,
        *,
        name: str = "console",
        ready_timeout_s: float = 900.0,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        self._session = session
        self._client = client
        self._name = name
        self._timeout = ready_timeout_s
        self._on_note = on_note
        self._load_error = ""
        self._loading = False
        self._warned = False
        self._aborted = False  # the sweep is stopping: no further server is launched
        self._changed = asyncio.Event()
        session.subscribe(self._on_event)

    @property
    def name(self) -> str:
        """The lane's name (its GPU)."""
        return self._name

    def _on_event(self, event: SessionEvent) -> None:
        if isinstance(event, LoadFinished) and event.error:
            self._load_error = event.error
        elif isinstance(event, ServerEvent) and self._session.state in SETTLED:
            self._changed.set()

    async def start(self, flags: ServeFlags, tag: SweepTag) -> StartResult:
        """Restart with ``flags`` as a new run tagged ``tag``; wait for ready or failed.

        The session launches only if the sweep was not stopped while the previous server
        was being stopped (``x`` then: no trial starts after it).
        """
        if self._aborted:
            raise LaneInterrupted(STOPPED_BEFORE_START)
        try:
            record = await self._session.restart(
                flags, sweep=tag, proceed=lambda: not self._aborted
            )
        except LaunchWithdrawn as exc:
            raise LaneInterrupted(STOPPED_BEFORE_START) from exc
        try:
            state = await self._settled()
        except TimeoutError:
            await self._session.stop_server()
            return StartResult(False, record.id, f"not ready after {self._timeout:g} s")
        current = self._session.current or record
        if state in (ServerState.STOPPED, ServerState.IDLE):  # stopped under the sweep
            raise LaneInterrupted(f"the server was stopped while run {current.label} started")
        if state is ServerState.READY:
            return StartResult(True, current.id, kv_tokens=current.startup.kv_cache_tokens)
        diagnosis = current.diagnosis
        if diagnosis is None:
            return StartResult(False, current.id, f"the server is {state.value}")
        return StartResult(False, current.id, diagnosis.summary, diagnosis.kind)

    async def _settled(self) -> ServerState:
        """Wait (on the session's own events) until the start is over: ready or not."""
        if self._session.state in SETTLED:
            return self._session.state
        self._changed = asyncio.Event()
        await asyncio.wait_for(self._changed.wait(), self._timeout)
        return self._session.state

    async def bench(
        self, load: LoadSpec, *, model: str | None, goodput: Mapping[str, float]
    ) -> BenchRun:
        """Run ``load`` (its SLOs with it) through the session; the hit rate from the
        hub's /metrics readings around it."""
        before = await self._prefix_counters()
        self._load_error, self._loading = "", True
        try:
            result = await self._session.run_load(load, model=model, goodput=goodput)
        finally:
            self._loading = False
        if result is None:
            raise LaneError(self._load_error or "the load could not run")
        after = await self._prefix_counters()
        return BenchRun(result, _hit_pct(before, after))

    async def reset_prefix_cache(self) -> bool:
        """``POST /reset_prefix_cache``; ``False`` (said once) where the endpoint is absent."""
        url = self._session.base_url
        if url is None:
            return False
        try:
            response = await self._client.post(url.rstrip("/") + "/reset_prefix_cache", timeout=30)
        except httpx.HTTPError:
            return False
        if response.status_code == 404 and not self._warned and self._on_note is not None:
            self._warned = True
            self._on_note(NO_DEV_MODE)
        return response.status_code == 200

    async def abort(self) -> None:
        """Cut a running load short, or stop a server still starting; launch no other."""
        self._aborted = True
        if self._loading:
            await self._session.cancel_load()
        elif self._session.state is ServerState.STARTING:
            await self._session.stop_server()

    async def release(self) -> None:
        """Nothing to let go: the next trial's restart replaces the server."""

    async def _prefix_counters(self) -> tuple[float, float] | None:
        sample = await self._session.fresh_metrics()
        if sample is None:
            return None
        hits = sample.extra.get("prefix_cache_hits_total")
        queries = sample.extra.get("prefix_cache_queries_total")
        return None if hits is None or queries is None else (hits, queries)


def _hit_pct(before: tuple[float, float] | None, after: tuple[float, float] | None) -> float | None:
    if before is None or after is None:
        return None
    queries = after[1] - before[1]
    return 100.0 * (after[0] - before[0]) / queries if queries > 0 else None
