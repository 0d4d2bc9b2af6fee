"""The worker a cluster sweep places on a node: one trial slot's server and its loads there.

:class:`TrialHost` is a Ray actor (async, so it streams its progress while a start or a
load runs), scheduled into its trial's placement group (``tp x pp`` GPUs on one node). It
builds the node's lane the way ``vtc sweep`` builds a local one
(:meth:`tui.modes.sweep.SweepMode.node_lane`: the simulator in ``--demo``, else the node's
vLLM), pinned with ``CUDA_VISIBLE_DEVICES`` to the GPU ids Ray gave it
(``ray.get_gpu_ids()``), and drives it through the same
:class:`~tui.tune.session_lane.SessionLane` a local sweep uses. The session records its runs
in a scratch store on the node; every reply carries the runs recorded or changed since the
previous one, and the head writes them into the board's store (the one writer).

What the worker starts ends with it. vtc's servers and loads run in sessions of their own
(a terminal's ^C never reaches them), so neither a process group Ray cleans up nor Ray's
default of killing a worker's direct children on its exit catches a worker that is
SIGKILLed (Ray's subreaper option is deprecated in 2.60 and, tried here, left such
children running). So each worker starts a warden (:mod:`tui.modes.ray_warden`, a plain
script) holding the read end of a pipe only the worker writes: the code that starts each
child (server, log relay, load) names it at once (:mod:`tui.server.children`), the worker
writes its pid down the pipe, the warden holds a pidfd on each (no PID reuse), and when the
pipe closes (the worker gone, however it went) it stops every one still running (their
process groups, vLLM's engine processes with them) and removes the worker's scratch
folder. A node that goes takes its processes with it; nothing is left to find later, so
there are no state files to sweep and no pid probes.

A worker serves one trial after another on the same GPUs (the head hands it on while the
next trial needs as many): :meth:`TrialHost.stop` stops the trial's server and keeps the
session; :meth:`TrialHost.close` ends it all.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx
import ray

from tui.domain.credentials import Credentials
from tui.domain.errors import VtcError
from tui.domain.events import Ready, StageReached
from tui.domain.flags.serve import ServeFlags
from tui.domain.inert import inert
from tui.domain.results import RunRecord, SweepTag
from tui.domain.sweep.outcome import Placement
from tui.domain.sweep.spec import SweepSpec
from tui.domain.workload import LoadProgress, LoadSpec
from tui.modes import ray_warden
from tui.modes.common import assemble
from tui.modes.options import ConsoleOptions
from tui.modes.sources import local_client
from tui.modes.sweep import CLUSTER_DIR, NodeLane, SweepMode
from tui.server import children
from tui.session.facade import Session
from tui.session.port import LoadFinished, SessionEvent
from tui.store.history import default_data_dir, history_file
from tui.store.private import private_dir
from tui.tune.lanes import BenchRun, LaneError, StartResult
from tui.tune.ray_lane import HostFailure, HostFailureKind, HostReply
from tui.tune.session_lane import SessionLane

LOG_EXCERPT_LINES = 20


@dataclass(frozen=True)
class HostConfig:
    """What every worker of one sweep is built with (put in the cluster's object store
    once, each worker given its reference)."""

    spec: SweepSpec
    options: ConsoleOptions
    data_dir: str | None = None  # a local instance: the head's; a joined cluster: the node's own
    ready_timeout_s: float = 900.0


def node_name() -> str:
    """The node as the trials name it: its host name and Ray's node id, shortened."""
    return f"{socket.gethostname()}:{ray.get_runtime_context().get_node_id()[:6]}"


class Warden:
    """The worker's warden process: told each child as the worker starts it, it stops
    those still running once the worker is gone (its pipe closed), and removes
    ``scratch``."""

    def __init__(self, scratch: Path) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, ray_warden.__file__, str(scratch)],
            stdin=subprocess.PIPE,
            start_new_session=True,  # deaf to a terminal's ^C, like the servers it watches
        )
        self._lock = threading.Lock()  # children start from the loop and from threads
        self._stop_listening = children.listen(self.tell)

    def tell(self, pid: int) -> None:
        """Name a child the worker just started (from whichever thread started it)."""
        with self._lock:
            stdin: IO[bytes] | None = self._proc.stdin
            if stdin is None or stdin.closed:
                return
            try:
                stdin.write(f"{pid}\n".encode())
                stdin.flush()
            except (BrokenPipeError, ValueError):
                pass  # the warden is gone: the worker is ending

    def end(self) -> None:
        """The worker is closing: the warden stops what is left and clears up (blocking)."""
        self._stop_listening()
        with self._lock:
            if self._proc.stdin is not None and not self._proc.stdin.closed:
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=ray_warden.GRACE_S * 2 + 5)
        except subprocess.TimeoutExpired:
            self._proc.kill()


class TrialHost:
    """One trial on a node (a Ray actor): its server, its loads, its runs."""

    def __init__(self, config: HostConfig) -> None:
        self._config = config
        self._session: Session | None = None
        self._lane: SessionLane | None = None
        self._client: httpx.AsyncClient | None = None
        self._warden: Warden | None = None
        self._activity = "placed"
        self._changed = asyncio.Event()
        self._closed = False
        self._sent: dict[int, RunRecord] = {}
        self._placement: Placement | None = None

    async def open(self) -> Placement:
        """Build the node's lane on the GPUs Ray gave this worker; where it is."""
        cfg = self._config
        gpus = tuple(str(g) for g in ray.get_gpu_ids())
        data_dir = Path(cfg.data_dir) if cfg.data_dir else default_data_dir()
        folder = private_dir(data_dir / CLUSTER_DIR / cfg.spec.sweep_id())
        scratch = Path(tempfile.mkdtemp(prefix="trial-", dir=folder))
        self._warden = Warden(scratch)  # first: whatever starts next is watched
        self._placement = Placement(node=node_name(), gpu_ids=list(gpus))
        lane = NodeLane(
            name=self._placement.describe(),
            gpus=gpus,
            state=scratch / "server.json",
            store=history_file(scratch),
        )
        parts = await asyncio.to_thread(SweepMode(cfg.spec).node_lane, cfg.options, data_dir, lane)
        session = assemble(parts.info, parts.services, poll_interval_s=cfg.options.poll_interval_s)
        session.subscribe(self._on_event)
        await session.start()
        self._session = session
        self._client = local_client(Credentials.from_env(os.environ))
        self._lane = SessionLane(
            session, self._client, name=lane.name, ready_timeout_s=cfg.ready_timeout_s
        )
        return self._placement

    async def start(self, flags: ServeFlags, tag: SweepTag) -> HostReply:
        """Start the trial's server (the previous one stopped first)."""
        lane = self._need()
        try:
            result = await lane.start(flags, tag)
        except LaneError as exc:
            return self._reply(failure=HostFailure.of(exc))
        facts = self._facts()
        excerpt = "" if result.ok else self._excerpt()
        return self._reply(start=dataclasses.replace(result, placement=facts, log_excerpt=excerpt))

    async def bench(
        self, load: LoadSpec, model: str | None, goodput: Mapping[str, float]
    ) -> HostReply:
        """Run ``load`` here, against this node's server."""
        lane = self._need()
        try:
            run = await lane.bench(load, model=model, goodput=goodput)
        except LaneError as exc:
            return self._reply(failure=HostFailure.of(exc))
        return self._reply(bench=run)

    async def reset_prefix_cache(self) -> HostReply:
        """Empty the server's prefix cache."""
        return self._reply(reset=await self._need().reset_prefix_cache())

    async def abort(self) -> None:
        """Cut the running load or start short (the sweep is stopping)."""
        if self._lane is not None:
            await self._lane.abort()

    async def watch(self) -> AsyncIterator[str]:
        """What the worker is doing, one line each time it changes (a streaming generator
        the head consumes; it ends when the worker closes)."""
        while not self._closed:
            await self._changed.wait()
            self._changed.clear()
            if not self._closed:
                yield self._activity

    def pids(self) -> dict[str, int]:
        """This worker's process and its server's (a test kills the one, finds the other
        gone)."""
        current = self._session.current if self._session is not None else None
        server = current.server_pid if current is not None else None
        return {"worker": os.getpid(), **({"server": server} if server else {})}

    async def stop(self) -> HostReply:
        """The trial is over: stop its server (the session stays, for the next trial on
        these GPUs); its runs' last states."""
        self._need()
        assert self._session is not None
        try:
            await self._session.stop_server()
        except VtcError as exc:
            return self._reply(failure=HostFailure(HostFailureKind.FAILED, exc.one_line()))
        self._tell("server stopped")
        return self._reply()

    async def close(self) -> HostReply:
        """Stop the server; the runs' last states; the warden clears the scratch folder."""
        if self._session is not None:
            await self._session.close()
        if self._client is not None:
            await self._client.aclose()
        reply = self._reply()
        self._closed = True
        self._changed.set()
        if self._warden is not None:
            await asyncio.to_thread(self._warden.end)
        return reply

    def _need(self) -> SessionLane:
        if self._lane is None:
            raise VtcError("the worker was not opened")
        return self._lane

    def _on_event(self, event: SessionEvent) -> None:
        if isinstance(event, StageReached):
            self._tell(f"starting: {event.stage.value} ({event.elapsed:.0f} s)")
        elif isinstance(event, Ready):
            self._tell("server ready")
        elif isinstance(event, LoadProgress):
            self._tell(
                f"load {event.done}/{event.total} done, {event.output_tokens_per_s:.0f} tok/s"
            )
        elif isinstance(event, LoadFinished):
            self._tell("load finished" if event.error is None else "load failed")

    def _tell(self, activity: str) -> None:
        self._activity = activity
        self._changed.set()

    def _facts(self) -> Placement | None:
        """Where the trial runs, with the GPU model, vLLM and driver its run recorded."""
        current = self._session.current if self._session is not None else None
        repro = current.repro if current is not None else None
        if self._placement is None or repro is None:
            return self._placement
        driver = repro.driver_version or ("simulated" if self._config.options.demo else None)
        facts = {"gpu_model": repro.gpu_name, "vllm_version": repro.vllm_version, "driver": driver}
        return self._placement.model_copy(update=facts)

    def _excerpt(self) -> str:
        lines = list(self._session.log_lines)[-LOG_EXCERPT_LINES:] if self._session else []
        return inert("\n".join(lines))

    def _reply(
        self,
        *,
        start: StartResult | None = None,
        bench: BenchRun | None = None,
        reset: bool = False,
        failure: HostFailure | None = None,
    ) -> HostReply:
        """The call's result and the runs recorded or changed since the last reply."""
        changed = []
        runs = self._session.runs if self._session is not None else []
        for run in runs:
            if run.id is not None and self._sent.get(run.id) != run:
                changed.append(run)
                self._sent[run.id] = run
        return HostReply(
            records=tuple(changed), start=start, bench=bench, reset=reset, failure=failure
        )
