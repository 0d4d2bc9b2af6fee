"""One writer per sweep (issue 18, item 6).

Two ``vtc sweep`` of one spec used to both run every trial into one journal. Now a lock per
sweep id (an flock beside the journal) is held by one process for the whole run: a second
process is refused at once with one line naming the holder; the lock goes with its holder's
death (SIGKILL included); the journal never holds one trial finished twice. Real processes
and real files.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fakes.sweep_process import start_sweep
from fakes.waiting import until_blocking

from tui.domain.sweep.outcome import TrialOutcome, TrialState
from tui.store.lock import SweepLock, SweepLocked, lock_holder, lock_path_for
from tui.tune.journal import Journal, journal_path
from tui.tune.spec_file import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC = """\
name = "one-writer"
strategy = "grid"
objective = "output_throughput"
sim_gpu = "rtx3080-10gb"

[base]
model = "meta-llama/Llama-3.2-1B-Instruct"

[base.flags]
max_model_len = 512

[parameters]
max_num_seqs = [8, 16, 32, 64]

[workload]
input_len = 32
output_len = 16
num_prompts = 8
"""
HOLD = """
import sys, time
from pathlib import Path
from tui.tune.spec_file import load_spec
from tui.store.lock import SweepLock
lock = SweepLock.for_journal(Path(sys.argv[1]))
lock.acquire()
print("held", flush=True)
time.sleep(600)
"""


def _holder_process(journal: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(journal)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_holder_is_refused_naming_the_first_and_death_releases(tmp_path: Path) -> None:
    journal = tmp_path / "sweeps" / "abc.jsonl"
    holder = _holder_process(journal)
    try:
        found = lock_holder(journal)
        assert found is not None and found.pid == holder.pid
        assert found.host == socket.gethostname() and found.started
        with pytest.raises(SweepLocked) as refused:
            SweepLock.for_journal(journal).acquire()
        line = refused.value.one_line()
        assert "\n" not in line and f"pid {holder.pid}" in line and socket.gethostname() in line
        holder.send_signal(signal.SIGKILL)  # no clean-up code runs: the kernel lets go
        holder.wait(timeout=30)
        with SweepLock.for_journal(journal) as mine:
            assert mine.held
            assert lock_holder(journal) is not None  # held by this process now
        assert lock_holder(journal) is None
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=30)
    assert oct(lock_path_for(journal).stat().st_mode & 0o777) == "0o600"


def _outcome(index: int, key: str) -> TrialOutcome:
    return TrialOutcome(index=index, key=key, state=TrialState.PRUNED, note=key)


def test_the_journal_never_holds_a_trial_finished_twice(tmp_path: Path) -> None:
    (tmp_path / "spec.toml").write_text(SPEC)
    spec = load_spec(tmp_path / "spec.toml")
    path = journal_path(tmp_path, spec.sweep_id())
    first = Journal(path, spec)
    assert first.record(_outcome(0, "a")) and first.record(_outcome(1, "b"))
    assert not first.record(_outcome(2, "a"))
    again = Journal(path, spec)  # a resumed run that finished "a" again
    assert not again.record(_outcome(3, "a"))
    keys = [
        json.loads(line)["trial"]["key"]
        for line in path.read_text().splitlines()
        if line.startswith('{"trial"')
    ]
    assert sorted(keys) == ["a", "b"]
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_a_second_vtc_sweep_of_the_same_spec_is_refused_with_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    data = tmp_path / "data"
    args = ["--demo", "--sim-speed", "20", "--startup-timeout", "120"]
    first = start_sweep(spec, data, args, n=1)
    try:
        sweeps = data / "sweeps"
        until_blocking(
            lambda: (
                sweeps.is_dir()
                and any(lock_holder(p.with_suffix(".jsonl")) for p in sweeps.glob("*.lock"))
            ),
            "the first sweep to hold its lock",
            120,
        )
        second = start_sweep(spec, data, args, n=2)
        code = second.wait(120)
        text = second.text().strip()
        assert code == 2, text
        refusal = [line for line in text.splitlines() if "already running" in line]
        assert len(refusal) == 1 and f"pid {first.proc.pid}" in refusal[0], text
        assert first.proc.poll() is None  # the first one goes on
    finally:
        if first.proc.poll() is None:
            first.proc.send_signal(signal.SIGTERM)  # stops its servers on the way out
            first.wait(120)
