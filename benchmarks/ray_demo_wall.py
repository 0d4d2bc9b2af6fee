"""One lane against a local Ray instance of 4 GPUs, the same 12-trial demo grid (issue 41).

    python benchmarks/ray_demo_wall.py [--quick] [--gpus 4] [--sim-speed 4]
                                       [--num-prompts 40] [--rate 8]

Runs ``python -m tui.cli sweep SPEC --demo`` (one lane, no Ray) and then
``python -m tui.cli sweep SPEC --demo --ray --ray-gpus 4`` on a 12-trial grid (the
simulator's A100 with Llama-3.1-8B, every trial serves), each in a fresh data dir, and
prints for each: the wall time of the whole command, the most trials that ran at once
(from ``--json``'s ``started_at``/``ended_at``), the nodes and GPU ids the trials carried,
the CPU the command and its processes used, and the load average before and after it.

Ray's start-up is counted apart: the sweep prints how long its cluster took to be ready
(``Ray ready in S s``: the local instance started, the lanes built), a cost a cluster that
is already up (``--ray HOST:6379``) does not pay per sweep. Goal (issue 41): the Ray run's
wall without that start-up, at most 0.5 of one lane's wall (the ratio with it is printed
too). The one lane is vtc's ordinary local sweep, unchanged. Where the cores are the limit,
on paper: the CPU the runs used, spread over this machine's cores, is the shortest wall the
Ray run could have had; that floor over one lane's wall is the best ratio the machine allows
(on 2 cores, 4 simulated servers, their loads and Ray's workers share 2 cores, so the
floor, not the GPUs, decides once it is above 1 / GPUs). Figures count only on a quiet
machine (``benchmarks/_quiet.py``: exit 0 met, 1 missed, 3 not valid above load 1.5).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._quiet import QuietGate  # noqa: E402

GOAL = 0.5  # Ray's wall, its start-up counted apart, over one lane's
RAY_READY = re.compile(r"Ray ready in ([0-9.]+) s")

SPEC = """\
name = "ray-demo-12"
strategy = "grid"
objective = "output_throughput"
sim_gpu = "a100-80gb"

[base]
model = "meta-llama/Llama-3.1-8B-Instruct"

[base.flags]
max_model_len = 1024

[parameters]
gpu_memory_utilization = [0.8, 0.85, 0.9]
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


@dataclass(frozen=True)
class Run:
    """One ``vtc sweep``: its wall, the CPU it and its processes used, Ray's start-up."""

    wall_s: float
    cpu_s: float
    ray_start_s: float
    report: dict


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(label: str, extra: list[str], folder: Path, sim_speed: float) -> Run:
    """One ``vtc sweep`` in its own data dir."""
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
    cpu0, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    cpu = _children_cpu() - cpu0  # the processes reaped down the tree (an undercount for Ray)
    if done.returncode not in (0, 1):
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
        raise SystemExit(f"{label}: exit {done.returncode}")
    ready = RAY_READY.search(done.stdout)
    report = json.loads(out.read_text(encoding="utf-8"))
    return Run(wall, cpu, float(ready.group(1)) if ready else 0.0, report)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short loads: checks that it runs")
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
    if args.quick:
        args.num_prompts, args.sim_speed = 8, 20.0
    gate = QuietGate("ray_demo_wall")
    with tempfile.TemporaryDirectory(prefix="vtc-ray-wall-") as tmp:
        folder = Path(tmp)
        spec = SPEC.format(num_prompts=args.num_prompts, rate=args.rate)
        (folder / "spec.toml").write_text(spec, encoding="utf-8")
        print(
            f"12-trial grid: {args.num_prompts} prompts at {args.rate:g} req/s per trial, "
            f"simulator time x{args.sim_speed:g}"
        )
        runs = {}
        for label, extra in (("one-lane", []), ("ray", ["--ray", "--ray-gpus", str(args.gpus)])):
            print(f"{label}: load average before {gate.sample():.2f}")
            done = runs[label] = run(label, extra, folder, args.sim_speed)
            trials = done.report["trials"]
            nodes = sorted({str(t["node"]) for t in trials if t.get("node")})
            gpu_ids = sorted({",".join(t["gpu_ids"]) for t in trials if t.get("gpu_ids")})
            print(
                f"{label}: {len(trials)} trials, {done.wall_s:.1f} s wall, at most "
                f"{peak_overlap(trials)} at once, nodes {nodes or '-'}, GPU ids "
                f"{gpu_ids or '-'}, CPU {done.cpu_s:.0f} s, load average after {gate.sample():.2f}"
            )
    return verdict(gate, runs["one-lane"], runs["ray"], args.gpus)


def verdict(gate: QuietGate, lane: Run, ray: Run, gpus: int) -> int:
    """Ray's start-up apart, the cores' floor on paper, the goal checked; the exit code."""
    cores = os.cpu_count() or 1
    if not ray.ray_start_s:
        print("the Ray run did not say when its cluster was ready ('Ray ready in')")
        return 1
    swept = ray.wall_s - ray.ray_start_s
    print(
        f"Ray start-up: {ray.ray_start_s:.1f} s of the Ray run's {ray.wall_s:.1f} s (counted "
        f"apart); with it the ratio is {ray.wall_s / lane.wall_s:.2f}"
    )
    # The same 12 servers and loads ran in both: the larger count is the nearer (a Ray
    # run's workers are reaped by its raylet, so part of their CPU is not counted).
    floor = max(ray.cpu_s, lane.cpu_s) / cores
    limit = " (the cores are the limit)" if floor / lane.wall_s > 1 / gpus else ""
    print(
        f"cores: the Ray run used {ray.cpu_s:.0f} CPU-s (one lane {lane.cpu_s:.0f}); on "
        f"{cores} cores it cannot finish under {floor:.1f} s: ratio floor "
        f"{floor / lane.wall_s:.2f} against the GPUs' {1 / gpus:.2f}{limit}"
    )
    gate.check(
        f"Ray {gpus} GPUs / one lane wall, Ray start-up apart", swept / lane.wall_s, goal=GOAL
    )
    return gate.finish()


if __name__ == "__main__":
    raise SystemExit(main())
