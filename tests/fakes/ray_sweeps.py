"""Cluster sweeps in a test: a demo spec, waits on the head's store, cleanup of what is left.

Shared by the Ray tests (they skip without the ``ray`` extra). Every wait is on a state the
head wrote (a run in its store, a line in its journal), bounded by a deadline that only a
hung process reaches; nothing waits on a guessed duration. What a worker started ends with
it (its warden stops it): the tests check that by the processes' ids, never by files.
"""

from __future__ import annotations

import asyncio
import tomllib
from collections.abc import Callable
from pathlib import Path

import psutil

from tui.domain.results import RunRecord, RunStatus
from tui.domain.sweep import SweepSpec
from tui.modes.options import ConsoleOptions
from tui.store.history import RunStore

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


def running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its parent does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def gone(pids: list[int], *, deadline_s: float = DEADLINE_S) -> float:
    """Wait until none of ``pids`` runs; the seconds it took (the deadline: a failure)."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    while any(running(pid) for pid in pids):
        if loop.time() - began > deadline_s:
            raise AssertionError(f"still running after {deadline_s:g} s: {pids}")
        await asyncio.sleep(0.1)
    return loop.time() - began
