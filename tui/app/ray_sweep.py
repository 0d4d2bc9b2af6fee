"""``vtc sweep SPEC --ray [ADDRESS] [--ray-gpus N]``: trials fan out over a Ray cluster.

The head (this process) holds the sweep's lock, its journal and the board's run store, one
writer each; the cluster's workers run each trial's server and loads on their nodes
(:mod:`tui.modes.ray_cluster`, :mod:`tui.tune.ray_lane`), each trial in a placement group
of its own, as many at once as the cluster has GPUs for now. A sweep no node can hold is
refused before anything starts, a trial no node can hold when its turn comes is refused
with the reason; a worker or node lost mid-trial marks the trial lost and runs it once
more; a head killed and started again resumes from the journal (finished trials replayed;
what the killed head's workers ran ended with them).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from tui.app.sweep_common import Printer, open_journal, stop_on_signals
from tui.domain.sweep.cluster import ClusterChoice
from tui.domain.sweep.outcome import SweepStatus
from tui.domain.sweep.spec import SweepSpec
from tui.modes.options import ConsoleOptions
from tui.modes.ray_cluster import node_gpus, open_cluster
from tui.tune.gpus import smallest_trial
from tui.tune.prune import Pruner
from tui.tune.run import SweepRun


class ProgressRelay:
    """The lanes' progress lines, passed to the sweep once it exists."""

    def __init__(self) -> None:
        self.target: Callable[[str], None] | None = None

    def __call__(self, text: str) -> None:
        if self.target is not None:
            self.target(text)


async def ray_sweep(
    spec: SweepSpec,
    args: argparse.Namespace,
    out: TextIO,
    options: ConsoleOptions,
    data_dir: Path,
) -> SweepStatus:
    """Run ``spec`` over the cluster ``args.ray`` names (a local instance when empty)."""
    choice = ClusterChoice(address=args.ray or None, gpus=args.ray_gpus)
    journal = await asyncio.to_thread(open_journal, data_dir, spec, args.fresh)
    relay = ProgressRelay()
    began = time.monotonic()
    cluster = await open_cluster(spec, options, choice, data_dir, relay)
    try:
        gpus = sum((await asyncio.to_thread(node_gpus)).values())
        width = cluster.count.width() if cluster.count is not None else len(cluster.lanes)
        print(
            f"sweep {spec.sweep_id()}: {spec.strategy} over Ray ({choice.describe()}: "
            f"{gpus:g} GPU(s) now, at least {smallest_trial(spec)} per trial, "
            f"{width} trial(s) at once now); Ray ready in {time.monotonic() - began:.1f} s",
            file=out,
        )
        if journal.finished:
            print(
                f"resuming: {len(journal.finished)} finished trial(s) in {journal.path}", file=out
            )
        printer = Printer(out, out.isatty())
        run = SweepRun(
            spec,
            cluster.lanes,
            journal=journal,
            pruner=Pruner(),
            emit=printer.show,
            count=cluster.count,
        )
        relay.target = run.context.note_activity
        with stop_on_signals(run):
            final = await run.run()
        printer.end()
        return final
    finally:
        await cluster.close()
