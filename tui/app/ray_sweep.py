"""``vtc sweep SPEC --ray [ADDRESS] [--ray-gpus N]``: trials fan out over a Ray cluster.

The head (this process) holds the sweep's lock, its journal and the board's run store, one
writer each; the cluster's workers run each trial's server and loads on their nodes
(:mod:`tui.modes.ray_cluster`, :mod:`tui.tune.ray_lane`), as many at once as the cluster
has GPUs for. A trial no node can hold is refused before anything starts; a worker or node
lost mid-trial marks the trial lost and runs it once more; a head killed and started again
resumes from the journal (finished trials replayed, the servers the killed head left
stopped by the new workers before any trial runs again).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from tui.app.sweep import Printer, open_journal, stop_on_signals
from tui.domain.sweep.cluster import ClusterChoice
from tui.domain.sweep.outcome import SweepStatus
from tui.domain.sweep.spec import SweepSpec
from tui.modes.options import ConsoleOptions
from tui.modes.ray_cluster import connect, disconnect, node_gpus, ray_lanes, sweep_up
from tui.tune.gpus import gpus_per_trial
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
    await asyncio.to_thread(connect, choice)
    try:
        lanes = await asyncio.to_thread(ray_lanes, spec, options, choice, data_dir, relay)
        gpus = sum(node_gpus().values())
        where = choice.address or "a local instance"
        print(
            f"sweep {spec.sweep_id()}: {spec.strategy} over {len(lanes)} lane(s) on Ray "
            f"({where}: {gpus:g} GPU(s), {gpus_per_trial(spec)} per trial)",
            file=out,
        )
        if journal.finished:
            print(
                f"resuming: {len(journal.finished)} finished trial(s) in {journal.path}", file=out
            )
        printer = Printer(out, out.isatty())
        run = SweepRun(spec, lanes, journal=journal, pruner=Pruner(), emit=printer.show)
        relay.target = run.context.note_activity
        with stop_on_signals(run):
            try:
                final = await run.run()
            finally:
                await asyncio.gather(*(lane.close() for lane in lanes), return_exceptions=True)
                if choice.address is None:  # this machine is the only node: no server left
                    await asyncio.to_thread(sweep_up, spec, data_dir)
        printer.end()
        return final
    finally:
        await asyncio.to_thread(disconnect)
