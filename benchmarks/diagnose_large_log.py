"""``vtc diagnose`` on a huge log: wall time and peak memory, against another code base.

    python benchmarks/diagnose_large_log.py [--size-mb 200] [--before ROOT]

Writes a log of ``--size-mb`` (a real CPU-vLLM startup log repeated, with a real failure
capture at the very end), then runs ``vtc diagnose LOG`` on it, as a file and through a pipe
(``-``), in a fresh interpreter each time, and prints the wall time and the peak resident
memory of each run (the interpreter and imports included; a run of the same command on the
small capture alone is printed as the baseline). ``--before ROOT`` runs the same commands
with another checkout's ``tui`` (``git archive <commit> tui | tar -x -C ROOT``) and prints
the ratios.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "tests" / "captures"

# Runs the command given as arguments and prints the child's peak RSS in KiB (Linux).
MEASURE = (
    "import resource, subprocess, sys\n"
    "stdin = open(sys.argv[1], 'rb') if sys.argv[1] != '-' else None\n"
    "done = subprocess.run(sys.argv[2:], stdin=stdin, stdout=subprocess.DEVNULL,\n"
    "                      stderr=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode)\n"
)


def write_log(path: Path, size_mb: int) -> None:
    """``size_mb`` MB of a clean startup log, then a failure (fail_a1) at the end."""
    block = (CAPTURES / "startup_pressure.log").read_bytes() * 64
    with path.open("wb") as f:
        written = 0
        while written < size_mb * 2**20:
            f.write(block)
            written += len(block)
        f.write((CAPTURES / "fail_a1_maxlen65536_kvbytes16M.log").read_bytes())


def measure(code_root: Path, log: Path, via_pipe: bool) -> tuple[float, int, int]:
    """(seconds, peak RSS in MiB, exit code) of ``vtc diagnose`` under ``code_root``."""
    cmd = [sys.executable, "-m", "tui.cli", "diagnose", "-" if via_pipe else str(log)]
    env = dict(os.environ, PYTHONPATH=str(code_root))
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(log) if via_pipe else "-", *cmd],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
        cwd=tempfile.gettempdir(),  # not the checkout: `python -m` would import its tui first
    )
    seconds = time.monotonic() - start
    rss_kib, code = done.stdout.split()
    return seconds, int(rss_kib) // 1024, int(code)


def main() -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--before", type=Path, help="another checkout's root (holds tui/)")
    args = parser.parse_args()
    bases = {"after": ROOT} | ({"before": args.before} if args.before else {})
    load = os.getloadavg()[0]
    print(f"load average {load:.1f}; log of {args.size_mb} MB; fresh interpreter per run")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        write_log(log, args.size_mb)
        small = CAPTURES / "fail_a1_maxlen65536_kvbytes16M.log"
        rows: dict[str, dict[str, tuple[float, int, int]]] = {}
        for name, root in bases.items():
            rows[name] = {
                "small file (baseline)": measure(root, small, via_pipe=False),
                f"{args.size_mb} MB file": measure(root, log, via_pipe=False),
                f"{args.size_mb} MB on stdin": measure(root, log, via_pipe=True),
            }
    for name, cases in rows.items():
        for case, (seconds, rss, code) in cases.items():
            print(f"{name:>6}  {case:24} {seconds:7.2f} s  {rss:6d} MiB  exit {code}")
    if "before" in rows:
        for case in rows["after"]:
            (ta, ra, _), (tb, rb, _) = rows["after"][case], rows["before"].get(case, (0, 0, 0))
            if tb and ta:
                print(f"ratio before/after  {case:24} time x{tb / ta:.1f}  memory x{rb / ra:.1f}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    _ = resource  # the measuring child uses it; imported here so a missing module fails early
    return 0


if __name__ == "__main__":
    sys.exit(main())
