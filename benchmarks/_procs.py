"""Process helpers shared by the benchmark scripts: servers in their own process group,
bounded waits, clean stops, clients pinned to one core, result tables.

Every wait is bounded; every process started here is stopped by its process group id
(SIGTERM, then SIGKILL after a grace period), never by name.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def cpu_set(text: str) -> set[int] | None:
    """``"0,1"`` -> {0, 1}; ``"any"`` -> None (no pinning); cores this host lacks dropped."""
    if text.strip().lower() == "any":
        return None
    allowed = os.sched_getaffinity(0)
    cores = {int(c) for c in text.split(",") if c.strip()} & allowed
    return cores or None


def pin_this_process(cpus: set[int] | None) -> None:
    """Pin every thread of this process (not only the calling one) to ``cpus``.

    ``os.sched_setaffinity(0, ...)`` moves the calling thread only; the executor threads
    asyncio already started would stay where they were. Processes forked later inherit it.
    """
    if not cpus:
        return
    for thread in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(thread), cpus)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A server process in its own session (process group), logging to a file."""

    def __init__(
        self,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: dict[str, str] | None = None,
        cpus: set[int] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self._log = log_path.open("wb")
        full_env = {**os.environ, **(env or {})}
        self.proc = subprocess.Popen(
            self.argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=REPO,
            start_new_session=True,
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
        )

    def wait_ready(self, url: str, timeout_s: float) -> None:
        """Poll ``url`` until it answers 200; raise with the log tail otherwise."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.25)
        raise RuntimeError(f"server not ready within {timeout_s:.0f} s:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        """The last lines of the server's log."""
        self._log.flush()
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace_s``; wait for the leader."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace_s)
        # Children may outlive the leader (vLLM's engine core): kill whatever is left.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self._log.close()


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL a child's process group (it was started in its own session) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def terminate_on_sigterm() -> None:
    """Turn SIGTERM into KeyboardInterrupt, so ``finally`` blocks stop what we started."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)


def run_client(
    argv: Sequence[str],
    *,
    timeout_s: float,
    cpus: set[int] | None = None,
    env: dict[str, str] | None = None,
    log_path: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one client to completion, pinned to ``cpus`` (sched_setaffinity before exec).

    Raises ``RuntimeError`` with the output's tail when it fails or runs past
    ``timeout_s`` (its whole process group is killed then).
    """
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=REPO,
        start_new_session=True,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise RuntimeError(
            f"client ran past {timeout_s:.0f} s: {argv[:3]}\n{out[-2000:]}"
        ) from None
    if log_path is not None:
        log_path.write_text(out, encoding="utf-8")
    if proc.returncode != 0:
        raise RuntimeError(f"client exited with {proc.returncode}: {argv[:3]}\n{out[-3000:]}")
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, "")


def load_json(path: Path) -> dict[str, Any]:
    """A result file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return data


def spread(values: Sequence[float]) -> str:
    """``mean (min-max, ±half-range % of the mean)`` for a handful of runs."""
    if not values:
        return "-"
    mean = statistics.fmean(values)
    digits = 0 if all(float(v).is_integer() for v in values) else 2
    if len(values) == 1:
        return f"{mean:.{digits}f}"
    half = (max(values) - min(values)) / 2
    pct = 100.0 * half / mean if mean else 0.0
    low, high = min(values), max(values)
    return f"{mean:.{digits}f} ({low:.{digits}f}-{high:.{digits}f}, ±{pct:.0f}%)"


def table(rows: Sequence[Sequence[str]], out: Any = None) -> None:
    """Print ``rows`` (the first is the header) as an aligned text table."""
    out = out or sys.stdout
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        out.write("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + "\n")
        if n == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")
    out.flush()


def load_average() -> str:
    """The host's 1-minute load average and core count (how busy the machine was)."""
    one, _, _ = os.getloadavg()
    return f"load average {one:.2f} on {os.cpu_count()} cores"
