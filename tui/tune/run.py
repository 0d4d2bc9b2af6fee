"""One sweep run: a strategy over lanes, to the end, a stop, or the budget."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from tui.domain.errors import VtcError
from tui.domain.sweep.outcome import SweepState, SweepStatus
from tui.domain.sweep.spec import SweepSpec
from tui.tune.context import BudgetSpent, Clock, SweepContext, SweepStopped
from tui.tune.journal import Journal
from tui.tune.lanes import Lane, LaneCount
from tui.tune.prune import Pruner
from tui.tune.strategies import make_strategy
from tui.tune.twin import Twin

FINISHED = "every trial the strategy planned has run"
"""Why a sweep that ran to its end ended (its state already says "done")."""


class SweepRun:
    """A sweep in progress: :meth:`run` it, :meth:`stop` it from elsewhere."""

    def __init__(
        self,
        spec: SweepSpec,
        lanes: Sequence[Lane],
        *,
        journal: Journal | None = None,
        pruner: Pruner | None = None,
        emit: Callable[[SweepStatus], None] | None = None,
        clock: Clock = time.monotonic,
        baseline_run_id: int | None = None,
        twin: Twin | None = None,
        count: LaneCount | None = None,
    ) -> None:
        self.spec = spec
        self._journal = journal
        self.context = SweepContext(
            spec,
            lanes,
            journal,
            emit=emit,
            clock=clock,
            baseline_run_id=baseline_run_id,
            pruner=pruner or Pruner(),
            twin=twin,
            count=count,
        )
        self.final: SweepStatus | None = None

    def stop(self) -> None:
        """Ask the sweep to stop; the running trials are cut short (and run again on resume)."""
        self.context.request_stop()

    async def run(self) -> SweepStatus:
        """Run the spec's strategy; the final status (also published)."""
        ctx = self.context
        state, message = SweepState.DONE, FINISHED
        ctx.publish(SweepState.RUNNING, f"{self.spec.strategy}: starting")
        try:
            async for decision in make_strategy(self.spec.strategy).run(ctx):
                ctx.apply(decision)
        except SweepStopped:
            state, message = SweepState.STOPPED, "stopped: the next run of this spec resumes it"
        except BudgetSpent as exc:
            message = f"{exc}: the best so far stands"
        except VtcError as exc:
            state, message = SweepState.FAILED, exc.one_line()
        if ctx.stop_requested and state is SweepState.DONE:
            state, message = SweepState.STOPPED, "stopped: the next run of this spec resumes it"
        if state is SweepState.DONE and self._journal is not None:
            await asyncio.to_thread(self._journal.close_done)
        self.final = ctx.status(state, message)
        ctx.publish(state, message)
        return self.final
