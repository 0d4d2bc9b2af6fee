"""``vtc sweep SPEC --demo --ray --ray-gpus 2`` in real processes: the head killed, restarted.

The head (the ``vtc sweep`` process, which started the local Ray instance) is SIGKILLed
once a trial finished. Its workers die with it, and what they started with them (each
worker's warden stops its server and load): no server is left running beside the rerun.
The second run resumes from the journal: the finished trials are replayed, not run again
(the same runs); the runs the killed head left live on the board are closed as lost with
the reason. ``--json`` carries when and where each trial ran.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")

from fakes.ray_sweeps import DEADLINE_S, demo_spec, head_runs, running  # noqa: E402
from fakes.sweep_process import start_sweep  # noqa: E402

from tui.domain.results import RunStatus  # noqa: E402
from tui.modes.ray_cluster import LEFT_BY_A_KILLED_HEAD  # noqa: E402

ARGS = ["--demo", "--sim-speed", "20", "--startup-timeout", "120", "--ray", "--ray-gpus", "2"]


def _servers(family: list[psutil.Process]) -> list[int]:
    """The simulated servers among the killed head's processes."""
    out = []
    for proc in family:
        try:
            if "tui.sim" in " ".join(proc.cmdline()):
                out.append(proc.pid)
        except psutil.Error:
            continue
    return out


def _wait_gone(pids: list[int], deadline_s: float) -> float:
    began = time.monotonic()
    while any(running(pid) for pid in pids):
        assert time.monotonic() - began < deadline_s, f"still running: {pids}"
        time.sleep(0.1)
    return time.monotonic() - began


def test_a_killed_head_resumes_without_repeating_or_doubling_trials(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(demo_spec(seqs=[8, 16, 32, 64], num_prompts=30, rate=5.0), encoding="utf-8")
    data = tmp_path / "data"
    out = tmp_path / "out.json"
    family: list[psutil.Process] = []
    try:
        first = start_sweep(spec, data, ARGS, n=1)
        first.wait_for_trials(1, deadline_s=DEADLINE_S)
        family = psutil.Process(first.proc.pid).children(recursive=True)  # Ray's, the servers
        first.kill()
        before = first.finished_trials()
        assert len(before) < 4, "the sweep finished before it was killed: nothing to resume"
        servers = _servers(family)
        assert servers, "no server ran when the head was killed"
        took = _wait_gone(servers, 60)  # they went with their workers: nothing to stop later
        print(f"\nkilled head: its servers gone in {took:.1f} s")

        second = start_sweep(spec, data, [*ARGS, "--json", str(out)], n=2)
        assert second.wait(DEADLINE_S) == 0, second.text()
        assert f"resuming: {len(before)} finished trial(s)" in second.text()

        report = json.loads(out.read_text(encoding="utf-8"))
        trials = report["trials"]
        assert len(trials) == 4 and report["resumed"] == len(before)
        by_note = {t["note"]: t for t in trials}
        for done in before:  # replayed from the journal: the same run, not started again
            assert by_note[done["note"]]["run_id"] == done["run_id"]
        journal = second.finished_trials()
        assert len({t["key"] for t in journal}) == len(journal) == 4  # each finished once
        for trial in trials:
            start = datetime.fromisoformat(trial["started_at"])
            assert start <= datetime.fromisoformat(trial["ended_at"])
            assert trial["node"] and trial["gpu_ids"] and trial["gpu_ids"][0] in ("0", "1")
        runs = head_runs(data)
        assert not [r for r in runs if r.status.live]  # nothing left "ready" on the board
        closed = [r for r in runs if r.ended_because == LEFT_BY_A_KILLED_HEAD]
        assert all(r.status is RunStatus.LOST for r in closed)
    finally:
        for proc in family:  # what the killed head started and nothing stopped
            if proc.is_running():
                proc.kill()
