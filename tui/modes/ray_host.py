"""The worker a cluster sweep places on a node: one trial slot's server and its loads there.

:class:`TrialHost` is a Ray actor (async, so the head can ask for its progress while a
start or a load runs), created with ``num_gpus = tp x pp``. It builds the node's lane the
way ``vtc sweep`` builds a local one (:meth:`tui.modes.sweep.SweepMode.node_lane`: the
simulator in ``--demo``, else the node's vLLM), pinned with ``CUDA_VISIBLE_DEVICES`` to the
GPU ids Ray gave it (``ray.get_gpu_ids()``), and drives it through the same
:class:`~tui.tune.session_lane.SessionLane` a local sweep uses. The session records its runs
in a scratch store on the node; every reply carries the runs recorded or changed since the
previous one, and the head writes them into the board's store (the one writer).

A server outlives its worker (vtc's servers have their own process group), so a killed head
or a killed worker leaves servers on the nodes: each worker first stops the servers that
gone workers of the same sweep left on its node (their state files name the head's run and
the worker's pid), so a trial that was running when its head or worker died never runs
twice at once; a local instance's head does the same once the sweep ends.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
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
from tui.modes.adapters import STOP_GRACE_S
from tui.modes.common import assemble
from tui.modes.options import ConsoleOptions
from tui.modes.sources import local_client
from tui.modes.sweep import CLUSTER_DIR, NodeLane, SweepMode
from tui.server.adopted import stop_recorded_server
from tui.session.facade import Session
from tui.session.port import LoadFinished, SessionEvent
from tui.store.history import default_data_dir
from tui.store.private import private_dir
from tui.store.server_state import ServerStateFile
from tui.tune.lanes import BenchRun, LaneError, LaneInterrupted, StartResult
from tui.tune.ray_lane import HostReply
from tui.tune.session_lane import SessionLane

LOG_EXCERPT_LINES = 20


@dataclass(frozen=True)
class HostConfig:
    """What every worker of one sweep is built with (sent once per worker)."""

    spec: SweepSpec
    options: ConsoleOptions
    head_run: str  # this head process's id: servers an earlier head left are stopped
    data_dir: str | None = None  # a local instance: the head's; a joined cluster: the node's own
    ready_timeout_s: float = 900.0


def node_name() -> str:
    """The node as the trials name it: its host name and Ray's node id, shortened."""
    return f"{socket.gethostname()}:{ray.get_runtime_context().get_node_id()[:6]}"


def worker_id(head_run: str) -> str:
    """``<head run>-w<pid>``: names a worker's state file and scratch store on its node, so
    whoever looks later can tell whether the worker that wrote them still runs."""
    return f"{head_run}-w{os.getpid()}"


def _owner_gone(path: Path, head_run: str) -> bool:
    """Whether the worker that wrote ``path`` is gone: another head's (killed, or ended),
    or this head's whose process died (a killed worker, its trial lost)."""
    if not path.name.startswith(head_run):
        return True
    found = re.search(r"-w(\d+)", path.name)
    return found is None or not psutil.pid_exists(int(found.group(1)))


def stop_left_servers(folder: Path, head_run: str) -> list[str]:
    """Stop the servers gone workers left in ``folder`` (their own process groups outlive
    them); their files go. What each stop said (blocking: up to the stop grace each)."""
    said: list[str] = []
    if not folder.is_dir():
        return said
    for path in sorted(folder.iterdir()):
        if not _owner_gone(path, head_run):
            continue
        if path.suffix == ".json":
            said.append(stop_recorded_server(ServerStateFile(path), grace_s=STOP_GRACE_S).message)
        elif path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
    return said


class TrialHost:
    """One trial slot on a node (a Ray actor): its server, its loads, its runs."""

    def __init__(self, config: HostConfig) -> None:
        self._config = config
        self._session: Session | None = None
        self._lane: SessionLane | None = None
        self._client: httpx.AsyncClient | None = None
        self._activity = "placed"
        self._sent: dict[int, RunRecord] = {}
        self._scratch: Path | None = None
        self._placement: Placement | None = None

    async def open(self) -> Placement:
        """Build the node's lane on the GPUs Ray gave this worker; where it is."""
        cfg = self._config
        gpus = tuple(str(g) for g in ray.get_gpu_ids())
        node = node_name()
        data_dir = Path(cfg.data_dir) if cfg.data_dir else default_data_dir()
        folder = private_dir(data_dir / CLUSTER_DIR / cfg.spec.sweep_id())
        await asyncio.to_thread(stop_left_servers, folder, cfg.head_run)
        worker = worker_id(cfg.head_run)
        self._scratch = Path(tempfile.mkdtemp(prefix=f"{worker}-", dir=folder))
        self._placement = Placement(node=node, gpu_ids=list(gpus))
        lane = NodeLane(
            name=self._placement.describe(),
            gpus=gpus,
            state=folder / f"{worker}.json",
            store=self._scratch / "runs.sqlite",
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
            return self._reply(error=exc.one_line(), interrupted=isinstance(exc, LaneInterrupted))
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
            return self._reply(error=exc.one_line(), interrupted=isinstance(exc, LaneInterrupted))
        return self._reply(bench=run)

    async def reset_prefix_cache(self) -> HostReply:
        """Empty the server's prefix cache."""
        return self._reply(reset=await self._need().reset_prefix_cache())

    async def abort(self) -> None:
        """Cut the running load or start short (the sweep is stopping)."""
        if self._lane is not None:
            await self._lane.abort()

    async def progress(self) -> str:
        """What the worker is doing now (one line)."""
        return self._activity

    async def close(self) -> HostReply:
        """Stop the server; the runs' last states; the scratch store goes."""
        if self._session is not None:
            await self._session.close()
        if self._client is not None:
            await self._client.aclose()
        reply = self._reply()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
        return reply

    def _need(self) -> SessionLane:
        if self._lane is None:
            raise VtcError("the worker was not opened")
        return self._lane

    def _on_event(self, event: SessionEvent) -> None:
        if isinstance(event, StageReached):
            self._activity = f"starting: {event.stage.value} ({event.elapsed:.0f} s)"
        elif isinstance(event, Ready):
            self._activity = "server ready"
        elif isinstance(event, LoadProgress):
            self._activity = (
                f"load {event.done}/{event.total} done, {event.output_tokens_per_s:.0f} tok/s"
            )
        elif isinstance(event, LoadFinished):
            self._activity = "load finished" if event.error is None else "load failed"

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
        error: str = "",
        interrupted: bool = False,
    ) -> HostReply:
        """The call's result and the runs recorded or changed since the last reply."""
        changed = []
        runs = self._session.runs if self._session is not None else []
        for run in runs:
            if run.id is not None and self._sent.get(run.id) != run:
                changed.append(run)
                self._sent[run.id] = run
        return HostReply(
            records=tuple(changed),
            start=start,
            bench=bench,
            reset=reset,
            error=error,
            interrupted=interrupted,
        )
