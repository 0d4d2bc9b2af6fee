"""One lane against a local Ray instance of 4 GPUs, the same 8-trial demo grid (issue 21).

    python benchmarks/ray_demo_wall.py [--gpus 4] [--sim-speed 4] [--num-prompts 40]
                                       [--rate 8]

Runs ``python -m tui.cli sweep SPEC --demo`` (one lane, no Ray) and then
``python -m tui.cli sweep SPEC --demo --ray --ray-gpus 4`` on an 8-trial grid (the
simulator's A100 with Llama-3.1-8B, every trial serves), each in a fresh data dir, and
prints for each: the wall time of the whole command (Ray's start and stop included), the
most trials that ran at once (from ``--json``'s ``started_at``/``ended_at``), the nodes and
GPU ids the trials carried, and the load average; then the ratio Ray / one lane.
Done when (issue 21): 4 trials at a time, and the ratio at most 0.5 on this 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SPEC = """\
name = "ray-demo-8"
strategy = "grid"
objective = "output_throughput"
sim_gpu = "a100-80gb"

[base]
model = "meta-llama/Llama-3.1-8B-Instruct"

[base.flags]
max_model_len = 1024

[parameters]
gpu_memory_utilization = [0.85, 0.9]
max_num_seqs = [8, 16, 32, 64]

[workload]
input_len = 64
output_len = 32
num_prompts = {num_prompts}
request_rate = {rate:g}

[slo]
p99_itl_ms = 5000
"""


def peak_overlap(trials: list[dict[str, object]]) -> int:
    """The most trials whose [started_at, ended_at] intervals overlap at one moment."""
    edges = []
    for t in trials:
        if t.get("started_at") and t.get("ended_at"):
            edges.append((datetime.fromisoformat(str(t["started_at"])), 1))
            edges.append((datetime.fromisoformat(str(t["ended_at"])), -1))
    peak = now = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):
        now += step
        peak = max(peak, now)
    return peak


def run(label: str, extra: list[str], folder: Path, sim_speed: float) -> tuple[float, dict]:
    """One ``vtc sweep`` in its own data dir: wall seconds and its JSON."""
    data = folder / f"data-{label}"
    out = folder / f"{label}.json"
    spec = folder / "spec.toml"
    cmd = [
        sys.executable,
        "-m",
        "tui.cli",
        "sweep",
        str(spec),
        "--demo",
        "--sim-speed",
        f"{sim_speed:g}",
        "--json",
        str(out),
        *extra,
    ]
    env = {**os.environ, "VTC_DATA_DIR": str(data), "PYTHONPATH": str(REPO)}
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    if done.returncode not in (0, 1):
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
        raise SystemExit(f"{label}: exit {done.returncode}")
    return wall, json.loads(out.read_text(encoding="utf-8"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument(
        "--sim-speed",
        type=float,
        default=4.0,
        help="the simulator's time scale (1: a start takes its real seconds)",
    )
    parser.add_argument("--num-prompts", type=int, default=40)
    parser.add_argument("--rate", type=float, default=8.0, help="each load's request rate")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vtc-ray-wall-") as tmp:
        folder = Path(tmp)
        spec = SPEC.format(num_prompts=args.num_prompts, rate=args.rate)
        (folder / "spec.toml").write_text(spec, encoding="utf-8")
        print(
            f"8-trial grid: {args.num_prompts} prompts at {args.rate:g} req/s per trial, "
            f"simulator time x{args.sim_speed:g}"
        )
        rows = []
        for label, extra in (("one-lane", []), ("ray", ["--ray", "--ray-gpus", str(args.gpus)])):
            wall, report = run(label, extra, folder, args.sim_speed)
            trials = report["trials"]
            nodes = sorted({str(t["node"]) for t in trials if t.get("node")})
            gpu_ids = sorted({",".join(t["gpu_ids"]) for t in trials if t.get("gpu_ids")})
            load = os.getloadavg()[0]
            rows.append((label, wall))
            print(
                f"{label}: {len(trials)} trials, {wall:.1f} s wall, at most "
                f"{peak_overlap(trials)} at once, nodes {nodes or '-'}, GPU ids "
                f"{gpu_ids or '-'}, load average {load:.1f}"
            )
    ratio = rows[1][1] / rows[0][1]
    verdict = "met" if ratio <= 0.5 else "NOT met"
    print(
        f"ray demo wall: one lane {rows[0][1]:.1f} s, Ray {args.gpus} GPUs {rows[1][1]:.1f} s, "
        f"ratio {ratio:.2f} (goal <= 0.5: {verdict})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
