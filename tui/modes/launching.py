"""The services of a console that launches its servers: local vLLM and the demo alike.

Both watch one launched server at a time (or the one a previous console left running), read
its ``/metrics`` and this host, run loads in their own process, predict with the watched
server's twin and run sweeps on it (on a Ray cluster when one is named). What differs (the
command, the GPU source, the history, what each run records of the machine) comes in.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tui.domain.credentials import Credentials
from tui.domain.results import RunRecord
from tui.load.process import ProcessLoadRunner
from tui.modes.adapters import GpuChoice, Machine
from tui.modes.cluster import cluster_lanes
from tui.modes.common import Reattach, Services
from tui.modes.options import ConsoleOptions
from tui.modes.sources import HostReader, MetricsReader, local_client
from tui.session.preflight import CliLoader
from tui.session.relaunch import ReleaseWaiter
from tui.session.repro import Reproducer
from tui.store.console_files import ConsoleFiles
from tui.store.history import RunStore


def launching_services(
    options: ConsoleOptions,
    data_dir: Path,
    *,
    history: tuple[RunStore, list[RunRecord]],
    back: Reattach,
    machine: Machine,
    credentials: Credentials,
    gpu: GpuChoice,
    reproducer: Reproducer,
    files: ConsoleFiles,
    launch_args: Sequence[str] = (),
    release: ReleaseWaiter | None = None,
    cli: CliLoader | None = None,
    twin_gpu: str | None = None,
) -> Services:
    """The services over ``machine`` (its launcher and estimator), the server found running
    (``back``) adopted, ``credentials`` sent with every request and load."""
    store, records = history
    return Services(
        store=store,
        history=records,
        slot=machine.slot(back.keeper, launch_args, existing=back.existing),
        metrics=MetricsReader(local_client(credentials)),
        runner=ProcessLoadRunner(api_key=credentials.api_key),
        gpu=gpu.reader,
        host=HostReader(),
        gpu_policy=gpu.policy,
        estimator=machine.estimator,
        cli=cli,
        release=release,
        reproducer=reproducer,
        files=files,
        twin_gpu=twin_gpu,
        twin=True,
        twin_profile=options.sim_profile,
        twin_design=(options.calibration_scale, options.calibration_passes),
        twin_runner=lambda: ProcessLoadRunner(api_key=credentials.api_key),
        cluster=cluster_lanes(options, data_dir),
    )
