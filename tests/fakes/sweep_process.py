"""``vtc sweep`` in a real process: start it, wait on its journal, kill it, read what it left.

Shared by the headless sweep tests against the simulator and against the real CPU build of
vLLM. Every wait is on the journal file or the process (bounded, failing with the
process's output), never on a sleep of a guessed length.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui.domain.results import RunRecord
from tui.store.history import RunStore
from tui.tune.journal import SWEEPS_DIR


@dataclass
class SweepProcess:
    """One ``python -m tui.cli sweep ...`` with its data dir and its output file."""

    proc: subprocess.Popen[bytes]
    data_dir: Path
    output: Path

    def text(self) -> str:
        """What it printed so far (stdout and stderr)."""
        return self.output.read_text(encoding="utf-8", errors="replace")

    def journal(self) -> Path | None:
        """The sweep's journal, once it exists."""
        found = sorted((self.data_dir / SWEEPS_DIR).glob("*.jsonl"))
        return found[0] if found else None

    def finished_trials(self) -> list[dict[str, Any]]:
        """The trials the journal holds (each as written), in the order they finished."""
        path = self.journal()
        if path is None:
            return []
        out = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line being written
            if isinstance(data, dict) and "trial" in data:
                out.append(data["trial"])
        return out

    def wait_for_trials(self, count: int, *, deadline_s: float) -> list[dict[str, Any]]:
        """Block until the journal holds ``count`` finished trials (or fail with the output)."""
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            trials = self.finished_trials()
            if len(trials) >= count:
                return trials
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)  # polling a file: the event is the journal line, not the time
        raise AssertionError(
            f"{count} finished trial(s) not journalled (exit {self.proc.poll()}):\n"
            + self.text()[-4000:]
        )

    def kill(self) -> None:
        """SIGKILL the sweep process alone (its servers live on, as after a crash)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def wait(self, timeout_s: float) -> int:
        """The exit code (fails with the output if it does not end in time)."""
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGTERM)  # stops its servers on the way out
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            raise AssertionError(
                f"vtc sweep still running after {timeout_s:g} s:\n" + self.text()[-4000:]
            ) from None


def start_sweep(
    spec: Path, data_dir: Path, args: list[str], *, env: dict[str, str] | None = None, n: int = 0
) -> SweepProcess:
    """Start ``vtc sweep SPEC ARGS`` with ``VTC_DATA_DIR=data_dir`` (output to a file)."""
    output = data_dir.parent / f"sweep-{data_dir.name}-{n}.out"
    full_env = {**os.environ, **(env or {}), "VTC_DATA_DIR": str(data_dir)}
    with output.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tui.cli", "sweep", str(spec), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=full_env,
        )
    return SweepProcess(proc, data_dir, output)


def stored_runs(path: Path) -> list[RunRecord]:
    """Every run the board's history holds."""
    return RunStore(path).list()
