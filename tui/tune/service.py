"""The console's sweeps: one at a time, on the session the operator drives.

The mode builds it with what a sweep needs besides the session (the data dir of its
journals, an HTTP client for the dev endpoint, the pre-flight estimator) and binds it to
the session once built. Its progress goes out on the session's bus as
:class:`~tui.session.port.SweepUpdated`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from pathlib import Path

import httpx

from tui.domain.errors import VtcError, one_line
from tui.domain.sweep.cluster import ClusterChoice
from tui.domain.sweep.outcome import SweepState, SweepStatus
from tui.domain.sweep.spec import SweepSpec
from tui.session.port import SessionEvent, SweepUpdated
from tui.store.lock import SweepLock
from tui.tune.journal import (
    Journal,
    journal_path,
    list_journals,
    load_spec_from_journal,
    read_summary,
)
from tui.tune.lanes import ClusterLanes, ClusterRun, Lane
from tui.tune.prune import Estimator, Pruner
from tui.tune.run import SweepRun
from tui.tune.session_lane import SessionLane, SweepTarget
from tui.tune.twin import catalogue_twin

logger = logging.getLogger(__name__)


class SweepBusy(VtcError):
    """A sweep is already running."""


class SweepService:
    """Implements ``tui.session.port.SweepControl`` over one session."""

    def __init__(
        self,
        *,
        data_dir: Path,
        emit: Callable[[SessionEvent], None],
        client: Callable[[], httpx.AsyncClient],
        estimator: Estimator | None = None,
        ready_timeout_s: float = 900.0,
        machine: str | None = None,
        twin_gpu: str | None = None,
        cluster: ClusterLanes | None = None,
    ) -> None:
        self._data_dir = data_dir
        self._twin_gpu = twin_gpu  # the demo's GPU: a twin-first sweep's twin (else its own)
        self._cluster = cluster
        self._machine = machine
        self._emit = emit
        self._client = client
        self._estimator = estimator
        self._timeout = ready_timeout_s
        self._session: SweepTarget | None = None
        self._run: SweepRun | None = None
        self._task: asyncio.Task[None] | None = None
        self._status: SweepStatus | None = None

    def bind(self, session: SweepTarget) -> None:
        """The session whose server the sweeps drive (once, when the mode built it)."""
        self._session = session

    @property
    def status(self) -> SweepStatus | None:
        """The running or last sweep's status."""
        return self._status

    @property
    def running(self) -> bool:
        """Whether a sweep runs (or is stopping)."""
        return self._task is not None and not self._task.done()

    def start(
        self,
        spec: SweepSpec,
        *,
        baseline_run_id: int | None = None,
        cluster: ClusterChoice | None = None,
    ) -> None:
        """Start ``spec`` in the background (its journal, if any, is resumed), on this
        session's server or on the Ray ``cluster``."""
        if self.running:
            raise SweepBusy(
                "a sweep is already running", hint="stop it first (x on the sweep screen)"
            )
        if self._session is None:
            raise VtcError("this session runs no sweeps")
        if cluster is not None and self._cluster is None:
            raise VtcError(
                "this console runs sweeps on its own server only",
                hint="a demo or local console runs them on Ray",
            )
        # One writer per sweep: refused at once (SweepLocked names the holder) when another
        # process runs it. A non-waiting flock on a small local file: it does not block.
        lock = SweepLock.for_journal(journal_path(self._data_dir, spec.sweep_id()))
        lock.acquire()
        self._task = asyncio.create_task(
            self._go(spec, baseline_run_id, lock, cluster), name="vtc-sweep"
        )

    async def stop(self) -> None:
        """Stop the running sweep and wait until it has (the trial in flight is cut short)."""
        if self._run is not None and self.running:
            self._run.stop()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def resume(self, sweep_id: str, *, baseline_run_id: int | None = None) -> SweepSpec:
        """Resume the sweep ``sweep_id`` (its journal), only on the machine its trials were
        measured on; :class:`VtcError` saying why not (no journal, finished, elsewhere)."""
        if self.running:
            raise SweepBusy("a sweep is already running", hint="x on the sweep screen stops it")
        path = journal_path(self._data_dir, sweep_id)
        summary = await asyncio.to_thread(read_summary, path)
        if summary is None:
            raise VtcError(f"sweep {sweep_id} has no journal here: nothing to resume")
        if summary.done:
            raise VtcError(
                f"sweep {summary.name} finished: nothing to resume",
                hint="g runs it again (its finished trials are replayed, not re-run)",
            )
        if summary.machine and self._machine and summary.machine != self._machine:
            raise VtcError(
                f"sweep {summary.name} was measured on {summary.machine}, this console runs "
                f"{self._machine}: not resumed (its numbers would not compare)",
                hint="resume it where it ran (the demo: the same --sim-gpu and --sim-speed)",
            )
        spec = await asyncio.to_thread(load_spec_from_journal, path)
        self.start(spec, baseline_run_id=baseline_run_id)
        return spec

    async def resumable(self) -> list[SweepSpec]:
        """Unfinished sweeps of this data dir, newest first (read in a thread)."""
        return await asyncio.to_thread(self._unfinished)

    def _unfinished(self) -> list[SweepSpec]:
        out = []
        for summary in list_journals(self._data_dir):
            if summary.done:
                continue
            try:
                out.append(load_spec_from_journal(summary.path))
            except (OSError, ValueError, VtcError):  # another version's, or torn: not offered
                continue
        return out

    def _publish(self, status: SweepStatus) -> None:
        self._status = status
        self._emit(SweepUpdated(status))

    def _note(self, text: str) -> None:
        if self._run is not None:
            self._run.context.note(text)

    def _activity(self, text: str) -> None:
        if self._run is not None:
            self._run.context.note_activity(text)

    async def _go(
        self, spec: SweepSpec, baseline: int | None, lock: SweepLock, cluster: ClusterChoice | None
    ) -> None:
        assert self._session is not None
        path = journal_path(self._data_dir, spec.sweep_id())
        client = self._client()
        lanes: list[Lane] = [
            SessionLane(
                self._session,
                client,
                name="console",
                ready_timeout_s=self._timeout,
                on_note=self._note,
            )
        ]
        placed: ClusterRun | None = None
        try:
            if cluster is not None and self._cluster is not None:
                placed = await self._cluster(spec, cluster, self._activity)
                lanes = placed.lanes
            machine = cluster.describe() if cluster is not None else self._machine
            journal = await asyncio.to_thread(
                functools.partial(Journal, path, spec, machine=machine)
            )
            twin = None
            if spec.strategy == "twin" and spec.twin.profile is None and self._twin_gpu:
                twin = catalogue_twin(self._twin_gpu, spec.goodput_slos())
            self._run = SweepRun(
                spec,
                lanes,
                journal=journal,
                pruner=Pruner(self._estimator),
                emit=self._publish,
                baseline_run_id=baseline,
                twin=twin,
                count=placed.count if placed is not None else None,
            )
            await self._run.run()
        except Exception as exc:  # the console reports it on the sweep screen and stays up
            logger.exception("sweep %s failed", spec.name)
            self._publish(
                SweepStatus(
                    sweep_id=spec.sweep_id(),
                    name=spec.name,
                    strategy=spec.strategy,
                    objective=spec.objective,
                    state=SweepState.FAILED,
                    message=one_line(exc),
                    trials=self._status.trials if self._status else (),
                )
            )
        finally:
            if placed is not None:
                await placed.close()
            lock.release()
            await client.aclose()
