"""The console's own cost while it watches a server: CPU per second and memory (issue 11).

    python benchmarks/console_cost.py            # 30 minutes at 1 Hz
    python benchmarks/console_cost.py --quick    # 5 minutes

Against the simulator (``python -m tui.sim serve``, simulated RTX 3080) under a steady load
(``vtc bench --duration``, 4 req/s, in its own process), two watchers run side by side,
each in its own process so psutil can measure it alone:

- **vtc**: the console's telemetry path as the session wires it, headless: the session's
  ``TelemetryHub`` over the demo's sources (the /metrics reader: bounded scrape, parse in
  a thread, 60 s latency windows, rates, the simulator's GPU gauges; the host reader:
  psutil over the server's tree), its history rings, freshness, server GPUs and advice
  at every tick, the run's series and a load's latency folded into a run record, and the
  GPU rows the panel computes; no terminal drawing;
- **bare scrape** (the reference every monitor must pay): ``GET /metrics`` with httpx and
  prometheus_client's parser, once a second, nothing else.

This script samples each watcher's CPU time and RSS every 10 s (psutil) and prints CPU as
a percentage of one core (after a 20 s warm-up), the ratio vtc / bare scrape, and RSS
after a 150 s warm-up (the 60 s latency windows and the advisor's 120 raw samples full),
at the end, its slope and its value minute by minute. Goal: under 5 % of a core; memory
flat once the history rings are full (they are bounded: 10 numbers x 3600 samples, ~4 MB,
full after an hour at 1 Hz, so a 30-minute run may see them grow by up to ~2 MB; the
printed bound says how much).

**With a load in progress** (issue 23):

    python benchmarks/console_cost.py --with-load [--duration 60]

The whole console (the attach mode's session, the Textual app headless over a board of
200 runs) watches the simulator while its own loads run back to back (``b``: 200 prompts,
64 concurrent, 128 in and 64 out), for each setting in turn: the load on the UI's own
loop with no refresh bound (before), and the load in its own process with the refresh
bounded at 2 Hz while it runs (after; also without the bound, to tell the two apart).
Printed per setting: the console process's CPU and its load workers' CPU, each as a
percentage of one core over the loads' wall time, the screen's updates per second (events
applied, or batches while the bound holds), and
the load average (other engineers use the CPU: read the figures beside it).

Every process started here is stopped by its process group, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from benchmarks._procs import (  # noqa: E402
    Server,
    free_port,
    load_average,
    table,
    terminate_on_sigterm,
)

MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
SAMPLE_EVERY_S = 10.0
WARM_UP_S = 20.0  # CPU: after the imports and the first scrapes
# RSS: after the bounded buffers that fill in the first minutes are full (the 60 s latency
# windows, the 120 raw samples the advisor reads), so that what grows after is a leak.
MEMORY_WARM_UP_S = 150.0
RING_BYTES_BOUND = 10 * 3600 * 120  # 10 rings x 3600 (t, value) pairs x ~120 bytes


async def _vtc_watcher(url: str, server_pid: int, duration_s: float, interval_s: float) -> None:
    from tui.domain.events import Launched, Ready
    from tui.domain.flags.serve import ServeFlags
    from tui.domain.gpus import gpu_rows
    from tui.domain.record import RunEvent, apply
    from tui.domain.results import BenchResult, RunRecord
    from tui.domain.telemetry import GpuSample, HostSample
    from tui.modes.sources import HostReader, MetricsReader, local_client
    from tui.session.hub import GpuPolicy, TelemetryHub
    from tui.session.port import TelemetryStatus

    record = RunRecord(id=1, label="#1", flags=ServeFlags(model=MODEL))
    latest: dict[type, object] = {}

    def fold(event: RunEvent, run_id: int | None) -> None:  # the run book's fold, no store
        nonlocal record
        record = apply(record, event)

    def panels(event: object) -> None:  # what the GPU panel computes at each status
        if isinstance(event, GpuSample | HostSample):
            latest[type(event)] = event
        elif isinstance(event, TelemetryStatus):
            gpu, host = latest.get(GpuSample), latest.get(HostSample)
            if isinstance(gpu, GpuSample):
                pids = host.server_pids if isinstance(host, HostSample) else ()
                gpu_rows(gpu, server_indices=event.server_gpus, server_pids=pids)

    hub = TelemetryHub(
        emit=panels,
        interval_s=interval_s,
        host=HostReader(),
        metrics=MetricsReader(local_client()),
        policy=GpuPolicy(simulated=True),  # the demo's: the simulator's own gauges
        record=fold,
    )
    hub.start()
    launched = Launched(pid=server_pid, argv=(), log_path=None)
    hub.follow(launched, record, url=None, pid=server_pid)
    hub.follow(Ready(elapsed=0.0), record, url=url.removesuffix("/metrics"), pid=server_pid)
    end = time.monotonic() + duration_s
    while time.monotonic() < end:  # a load bracket a minute: its latency summary, its series
        hub.begin_load()
        await asyncio.sleep(max(0.0, min(60.0, end - time.monotonic())))
        hub.end_load(BenchResult(completed=0))
    await hub.aclose()


async def _bare_watcher(url: str, duration_s: float, interval_s: float) -> None:
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    end = time.monotonic() + duration_s
    async with httpx.AsyncClient(trust_env=False) as client:
        while time.monotonic() < end:
            started = time.monotonic()
            try:
                response = await client.get(url, timeout=3.0)
                list(text_string_to_metric_families(response.text))
            except (httpx.HTTPError, ValueError):
                pass
            await asyncio.sleep(max(0.0, interval_s - (time.monotonic() - started)))


@dataclass
class Watched:
    """One watcher process and its (wall, cpu seconds, rss bytes) samples."""

    name: str
    server: Server
    samples: list[tuple[float, float, int]] = field(default_factory=list)

    def sample(self) -> None:
        proc = psutil.Process(self.server.proc.pid)
        times = proc.cpu_times()
        self.samples.append((time.monotonic(), times.user + times.system, proc.memory_info().rss))

    def after_warm_up(self, warm_up_s: float = WARM_UP_S) -> list[tuple[float, float, int]]:
        start = self.samples[0][0] + warm_up_s
        return [s for s in self.samples if s[0] >= start] or self.samples[-2:]

    def cpu_percent(self) -> float:
        kept = self.after_warm_up()
        (w0, c0, _), (w1, c1, _) = kept[0], kept[-1]
        return 100.0 * (c1 - c0) / (w1 - w0) if w1 > w0 else float("nan")

    def rss(self) -> tuple[int, int, int, float]:
        """(after warm-up, at the end, max, slope in MB per hour) of the RSS."""
        kept = self.after_warm_up(MEMORY_WARM_UP_S)
        walls = [w for w, _, _ in kept]
        rss = [r for _, _, r in kept]
        slope = 0.0
        if len(kept) >= 3:
            slope = statistics.linear_regression(walls, rss).slope * 3600 / 2**20
        return rss[0], rss[-1], max(rss), slope


def _spawn(role: str, url: str, args: argparse.Namespace, logs: Path, pid: int) -> Server:
    argv = [sys.executable, __file__, "--role", role, "--url", url, "--server-pid", str(pid)]
    argv += ["--duration", str(args.duration), "--interval", str(args.interval)]
    return Server(argv, logs / f"{role}.log")


def _measure(args: argparse.Namespace) -> int:
    logs = Path(tempfile.mkdtemp(prefix="console-cost-"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    sim_argv = [sys.executable, "-m", "tui.sim", "serve", MODEL, "--sim-gpu", "rtx3080-10gb"]
    sim_argv += ["--host", "127.0.0.1", "--port", str(port), "--sim-speed", "1"]
    started: list[Server] = []
    try:
        sim = Server(sim_argv, logs / "sim.log")
        started.append(sim)
        sim.wait_ready(base + "/health", 120)
        load_argv = [sys.executable, "-m", "tui.cli", "bench", "--base-url", base]
        load_argv += ["--model", MODEL, "--request-rate", "4", "--max-concurrency", "64"]
        load_argv += ["--random-input-len", "256", "--random-output-len", "128"]
        load_argv += ["--duration", str(args.duration + 30), "--disable-tqdm"]
        started.append(Server(load_argv, logs / "load.log"))
        watched = [
            Watched("vtc", _spawn("vtc", base + "/metrics", args, logs, sim.proc.pid)),
            Watched("bare scrape", _spawn("bare", base + "/metrics", args, logs, sim.proc.pid)),
        ]
        started.extend(w.server for w in watched)
        print(f"simulator {base}, {load_average()}, {args.duration:.0f} s at {args.interval:g} s")
        end = time.monotonic() + args.duration
        while time.monotonic() < end and all(w.server.proc.poll() is None for w in watched):
            for w in watched:
                w.sample()
            time.sleep(min(SAMPLE_EVERY_S, max(0.1, end - time.monotonic())))
        for w in watched:
            if w.server.proc.poll() is not None:
                print(f"{w.name} exited early:\n{w.server.tail()}")
                return 1
            w.sample()
        _report(watched)
        print(f"after: {load_average()}; logs in {logs}")
        return 0
    finally:
        for server in reversed(started):
            server.stop(grace_s=5)


def _report(watched: list[Watched]) -> None:
    vtc, bare = watched
    rows = [["watcher", "CPU % of a core", "RSS after warm-up", "RSS at end", "RSS max", "slope"]]
    for w in watched:
        first, last, peak, slope = w.rss()
        rows.append(
            [
                w.name,
                f"{w.cpu_percent():.2f}",
                f"{first / 2**20:.1f} MB",
                f"{last / 2**20:.1f} MB",
                f"{peak / 2**20:.1f} MB",
                f"{slope:+.1f} MB/h",
            ]
        )
    table(rows)
    ratio = vtc.cpu_percent() / bare.cpu_percent() if bare.cpu_percent() > 0 else float("nan")
    first, last, _, _ = vtc.rss()
    growth = (last - first) / 2**20
    print(f"vtc / bare scrape CPU: {ratio:.2f}x")
    minutes = [f"{r / 2**20:.1f}" for w, _, r in vtc.samples if (w - vtc.samples[0][0]) % 60 < 10]
    print("vtc RSS by minute (MB): " + " ".join(minutes))
    print(
        f"goal CPU < 5 % of a core: {'met' if vtc.cpu_percent() < 5 else 'NOT met'}; "
        f"RSS grew {growth:+.1f} MB (history rings bounded at "
        f"{RING_BYTES_BOUND / 2**20:.1f} MB when full)"
    )


LOAD = {"input_len": 128, "output_len": 64, "num_prompts": 200, "max_concurrency": 64}
SETTINGS = [  # (name, the load's client, refresh bound while it runs)
    ("before: load on the UI loop", "in-loop", None),
    ("load in its own process", "worker", None),
    ("after: own process + 2 Hz bound", "worker", 0.5),
]


async def _console_with_load(
    url: str, data_dir: Path, client: str, refresh: float | None, duration_s: float
) -> tuple[float, float, float, int]:
    """(console CPU %, workers' CPU %, screen updates per second, loads) over
    ``duration_s``: an update is one event applied, or one batch while the bound holds."""
    from benchmarks.console_agreement import console_session
    from tui.domain.workload import LoadSpec
    from tui.ui.app import create_app

    session = console_session(url, data_dir, client)
    app = create_app(session, clock=None, load_refresh_s=refresh)
    me = psutil.Process()
    updates = loads = 0
    async with app.run_test(size=(160, 50)) as pilot:
        screen = app.main_screen
        apply = screen.apply

        def counted(event: object) -> None:  # each event the panels are updated with
            nonlocal updates
            updates += 1
            apply(event)  # type: ignore[arg-type]

        screen.apply = counted  # type: ignore[method-assign]
        await pilot.pause()
        t0, mine0 = time.monotonic(), me.cpu_times()
        end = t0 + duration_s
        while time.monotonic() < end:
            result = await session.run_load(LoadSpec(**LOAD))  # type: ignore[arg-type]
            loads += result is not None
        wall, mine = time.monotonic() - t0, me.cpu_times()
        await session.close()
    own = (mine.user + mine.system) - (mine0.user + mine0.system)
    children = (mine.children_user + mine.children_system) - (
        mine0.children_user + mine0.children_system
    )
    batches = app.pacer.batches if app.pacer is not None else updates
    return 100 * own / wall, 100 * children / wall, batches / wall, loads


def _measure_with_load(args: argparse.Namespace) -> int:
    from benchmarks.console_agreement import board_history

    logs = Path(tempfile.mkdtemp(prefix="console-cost-load-"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    sim_argv = [sys.executable, "-m", "tui.sim", "serve", MODEL, "--sim-gpu", "rtx3080-10gb"]
    sim_argv += ["--host", "127.0.0.1", "--port", str(port), "--sim-speed", "4"]
    sim = Server(sim_argv, logs / "sim.log")
    rows = [["setting", "console CPU %", "load worker CPU %", "updates/s", "loads", "load avg"]]
    try:
        sim.wait_ready(base + "/health", 120)
        for n, (name, client, refresh) in enumerate(SETTINGS):
            data = logs / f"data-{n}"
            board_history(data, MODEL)
            own, workers, fps, loads = asyncio.run(
                _console_with_load(base, data, client, refresh, args.duration)
            )
            rows.append(
                [
                    name,
                    f"{own:.1f}",
                    f"{workers:.1f}",
                    f"{fps:.1f}",
                    str(loads),
                    f"{os.getloadavg()[0]:.1f}",
                ]
            )
            print(f"{name}: console {own:.1f} %, workers {workers:.1f} % ({load_average()})")
        table(rows)
        return 0
    finally:
        sim.stop(grace_s=5)


def main(argv: list[str] | None = None) -> int:
    """Entry point (also the watchers' child processes, by ``--role``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 minutes instead of 30")
    parser.add_argument("--duration", type=float, help="seconds to measure (default 1800)")
    parser.add_argument("--interval", type=float, default=1.0, help="poll interval (1 Hz)")
    parser.add_argument("--role", choices=("measure", "vtc", "bare"), default="measure")
    parser.add_argument(
        "--with-load", action="store_true", help="the whole console while its own loads run"
    )
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.duration is None:
        args.duration = 60.0 if args.with_load else 300.0 if args.quick else 1800.0
    if args.role == "vtc":
        asyncio.run(_vtc_watcher(args.url, args.server_pid, args.duration + 60, args.interval))
        return 0
    if args.role == "bare":
        asyncio.run(_bare_watcher(args.url, args.duration + 60, args.interval))
        return 0
    terminate_on_sigterm()
    if args.with_load:
        return _measure_with_load(args)
    return _measure(args)


if __name__ == "__main__":
    sys.exit(main())
