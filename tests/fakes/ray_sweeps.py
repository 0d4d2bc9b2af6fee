"""Cluster sweeps in a test: a demo spec, waits on the head's store, cleanup of what is left.

Shared by the Ray tests (they skip without the ``ray`` extra). Every wait is on a state the
head wrote (a run in its store, a line in its journal), bounded by a deadline that only a
hung process reaches; nothing waits on a guessed duration. Servers a killed worker or node
left behind (vtc's servers have their own process group) are stopped by their state files.
"""

from __future__ import annotations

import asyncio
import tomllib
from collections.abc import Callable
from pathlib import Path

from tui.domain.results import RunRecord, RunStatus
from tui.domain.sweep import SweepSpec
from tui.modes.options import ConsoleOptions
from tui.modes.sweep import CLUSTER_DIR
from tui.server.adopted import stop_recorded_server
from tui.store.history import RunStore
from tui.store.server_state import ServerStateFile

DEADLINE_S = 240.0  # a bound for a hung process on a busy machine, never reached otherwise


def demo_spec(*, seqs: list[int], num_prompts: int = 12, rate: float = 6.0) -> str:
    """A grid over ``max_num_seqs`` on the simulated A100 (every trial serves); each load
    sends ``num_prompts`` at ``rate`` req/s of real time, so a trial lasts about
    ``num_prompts / rate`` seconds whatever the machine's speed."""
    return f"""\
name = "ray-{len(seqs)}"
strategy = "grid"
objective = "output_throughput"
sim_gpu = "a100-80gb"

[base]
model = "meta-llama/Llama-3.1-8B-Instruct"

[base.flags]
max_model_len = 1024

[parameters]
max_num_seqs = {seqs}

[workload]
input_len = 32
output_len = 16
num_prompts = {num_prompts}
request_rate = {rate}

[slo]
p99_itl_ms = 5000
"""


def spec_from(text: str) -> SweepSpec:
    """The spec ``text`` holds."""
    return SweepSpec.model_validate(tomllib.loads(text))


def demo_options(data_dir: Path) -> ConsoleOptions:
    """A fast simulator (time 20x), bounded starts."""
    return ConsoleOptions(
        demo=True, sim_speed=20.0, startup_timeout=120.0, data_dir=data_dir, autostart=False
    )


def head_runs(data_dir: Path) -> list[RunRecord]:
    """The runs the head wrote into the board's store."""
    path = data_dir / "demo-runs.sqlite"
    return RunStore(path).list() if path.exists() else []


async def wait_for_run(
    data_dir: Path, found: Callable[[RunRecord], bool], *, deadline_s: float = DEADLINE_S
) -> RunRecord:
    """The first run of the head's store for which ``found`` holds (polled: the head writes
    it from another task; the wait ends on the record, not on a time)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while loop.time() < end:
        runs = await asyncio.to_thread(head_runs, data_dir)
        for run in runs:
            if found(run):
                return run
        await asyncio.sleep(0.2)
    raise AssertionError("no such run in the head's store before the deadline")


def serving_on(fragment: str) -> Callable[[RunRecord], bool]:
    """A run whose server is up on the node (or GPUs) ``fragment`` names."""
    return lambda run: (
        run.status is RunStatus.READY and run.sweep is not None and fragment in run.sweep.where
    )


def left_servers(data_dir: Path) -> list[Path]:
    """State files the cluster's workers left (their servers possibly still running)."""
    return sorted((data_dir / CLUSTER_DIR).rglob("*.json"))


def stop_left_servers(data_dir: Path) -> None:
    """Stop every server a worker's state file still names (a killed worker's, a lost
    node's): the test leaves no process behind."""
    for path in left_servers(data_dir):
        stop_recorded_server(ServerStateFile(path), grace_s=5.0)
