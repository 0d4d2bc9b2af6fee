"""Load-client benchmark: ours against ``vllm bench serve``, on one core each, vs vtc-sim.

    python benchmarks/loadgen.py [--quick] [--repeats N] [--server-cpu 0] [--client-cpu 1]

Starts ``vtc-sim`` (pinned to ``--server-cpu``) with injected fixed delays
(``--sim-fixed-ttft-ms``/``--sim-fixed-itl-ms``: every stream gets its first token TTFT
after arrival and then one every ITL, however many streams run: the server is not a cost
model but a metronome), warms it up, then drives it with each client pinned to
``--client-cpu`` (``os.sched_setaffinity`` in the child before exec), rotating the order
of the clients from repeat to repeat:

- ``vtc bench`` (``python -m tui.app.bench``), its own transport (the default:
  asyncio protocols that stamp each read before any parsing, ``tui/load/wire.py``);
- ``vtc bench --transport aiohttp``: the same runner on bench serve's HTTP library;
- ``vllm bench serve`` from the provisioned vLLM venv, unchanged, through
  ``_vllm_timed.py``, which only adds the CPU time of its streaming phase to the result;
- a bare asyncio reader (``_rawclient.py``): not a load generator but the reference for
  what the server delivers to a client that does almost nothing, and for the smallest
  timing error this machine allows.

Two kinds of runs, at 256 and 1024 concurrent streams:

1. **throughput**: TTFT 20 ms, ITL 1 ms, 256 output tokens, all requests at once, so the
   server offers far more than a client can take (256k tokens/s at 256 streams): each
   client streams as fast as it can. Reported: output tokens per second (wall clock)
   and per client CPU-second, i.e. what the client sustains on one core of its own. On a
   shared machine the second is the robust figure: it does not depend on what other
   processes take from the core in the meantime.
2. **timing**: TTFT 100 ms, 64 output tokens, a steady 12,800 tokens/s (ITL 20 ms at 256
   streams, 80 ms at 1024), requests arriving at concurrency/2 per second (Poisson) so
   the simulator is never the limit. Each measured ITL and TTFT is compared with the
   injected delay: p99 of |ITL - itl| and of (TTFT - ttft), from each tool's per-request
   lists (``--save-detailed``); the bare reader's error is the floor.

Prints a table per kind, the ratios ours / vllm bench serve, then the issue's table (one
row per stream count: capacity and wall-clock ratios, p99 ITL and TTFT errors of vtc,
bench serve and the bare reader) with the goals checked and the machine's load average
over the whole measurement. Bounded: every run has a timeout and the whole script a
deadline; every process it starts is stopped by its process group. Exit code 0 on
completion, 2 when vLLM is not provisioned.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._procs import (
    Server,
    free_port,
    load_average,
    load_json,
    run_client,
    table,
    terminate_on_sigterm,
)
from tui.server.provision import find_provisioned

HERE = Path(__file__).resolve().parent
CONCURRENCIES = (256, 1024)
RUN_TIMEOUT_S = 240.0
LABELS = {
    "vtc": "vtc bench",
    "vtc-aiohttp": "vtc bench (aiohttp)",
    "vllm": "vllm bench serve",
    "raw": "bare reader (reference)",
}


@dataclass(frozen=True)
class Setting:
    """One simulator configuration and the workload the clients run against it."""

    kind: str  # "throughput" or "timing"
    streams: int
    ttft_ms: float
    itl_ms: float
    output_len: int
    waves: int  # prompts = waves x streams
    rate: float | None  # requests/s, None = all at once
    clients: tuple[str, ...]

    def prompts(self, quick: bool, client: str) -> int:
        return self.streams * (1 if quick else self.waves)


def settings() -> list[Setting]:
    """Throughput then timing, each at 256 and 1024 streams."""
    out = [
        Setting("throughput", n, 20.0, 1.0, 256, 2, None, ("vtc", "vllm", "raw", "vtc-aiohttp"))
        for n in CONCURRENCIES
    ]
    out += [
        # The same 12,800 tokens/s at both stream counts: ITL = streams / 12.8 ms.
        Setting("timing", n, 100.0, n / 12.8, 64, 2, n / 2.0, ("vtc", "vllm", "raw", "vtc-aiohttp"))
        for n in CONCURRENCIES
    ]
    return out


@dataclass
class Sample:
    """One client run's numbers."""

    tok_s: float
    cpu_s: float
    tokens: int
    duration: float
    itl_err_p99: float | None = None
    itl_err_p50: float | None = None
    ttft_err_p99: float | None = None

    @property
    def tok_per_cpu_s(self) -> float:
        return self.tokens / self.cpu_s if self.cpu_s > 0 else float("nan")


def timing_errors(data: dict[str, Any], setting: Setting) -> tuple[float, float, float]:
    """``(p99 |ITL - itl|, p50 |ITL - itl|, p99 (TTFT - ttft))`` in ms, successes only."""
    errors = data.get("errors") or [""] * len(data["ttfts"])
    ok = [i for i, e in enumerate(errors) if not e]
    itls = np.array([g for i in ok for g in data["itls"][i]], dtype=float) * 1000.0
    ttfts = np.array([data["ttfts"][i] for i in ok], dtype=float) * 1000.0
    itl_err = np.abs(itls - setting.itl_ms)
    return (
        float(np.percentile(itl_err, 99)),
        float(np.percentile(itl_err, 50)),
        float(np.percentile(ttfts - setting.ttft_ms, 99)),
    )


class Bench:
    """Runs the clients against one simulator at a time."""

    def __init__(self, args: argparse.Namespace, work: Path, vllm_python: Path, model: str):
        self.args = args
        self.work = work
        self.vllm_python = vllm_python
        self.model = model
        self.runs = 0

    def command(self, client: str, s: Setting, port: int, out: Path) -> list[str]:
        num = s.prompts(self.args.quick, client)
        if client == "raw":
            argv = [sys.executable, str(HERE / "_rawclient.py"), "127.0.0.1", str(port)]
            argv += [self.model, str(s.streams), str(num), str(s.output_len), str(out)]
            return argv + ([str(s.rate)] if s.rate else [])
        flags = [
            "--base-url",
            f"http://127.0.0.1:{port}",
            "--model",
            self.model,
            "--dataset-name",
            "random",
            "--random-input-len",
            "32",
            "--random-output-len",
            str(s.output_len),
            "--num-prompts",
            str(num),
            "--max-concurrency",
            str(s.streams),
            "--percentile-metrics",
            "ttft,tpot,itl,e2el",
            "--metric-percentiles",
            "50,99",
            "--disable-tqdm",
            "--save-result",
            "--result-filename",
            str(out),
        ]
        if s.rate:
            flags += ["--request-rate", str(s.rate)]
        if s.kind == "timing":
            flags.append("--save-detailed")
        if client == "vllm":
            timed = str(HERE / "_vllm_timed.py")
            return [str(self.vllm_python), timed, "--backend", "openai", *flags]
        transport = ["--transport", "aiohttp" if client == "vtc-aiohttp" else "native"]
        return [sys.executable, "-m", "tui.app.bench", *transport, *flags]

    def run(self, client: str, s: Setting, port: int) -> Sample:
        self.runs += 1
        out = self.work / f"{s.kind}-{s.streams}-{client}-{self.runs}.json"
        run_client(
            self.command(client, s, port, out),
            timeout_s=RUN_TIMEOUT_S,
            cpus={self.args.client_cpu},
            env={"HF_HUB_OFFLINE": "1"},
            log_path=out.with_suffix(".log"),
        )
        data = load_json(out)
        if data.get("failed"):
            raise RuntimeError(f"{client}: {data['failed']} failed requests ({out})")
        sample = Sample(
            tok_s=float(data["output_throughput"]),
            cpu_s=float(data["client_cpu_s"]),
            tokens=int(data["total_output_tokens"]),
            duration=float(data["duration"]),
        )
        if s.kind == "timing":
            sample.itl_err_p99, sample.itl_err_p50, sample.ttft_err_p99 = timing_errors(data, s)
        return sample

    def warm_up(self, s: Setting, port: int) -> None:
        """Connections, first-request costs and the first GC passes, before measuring."""
        argv = [sys.executable, str(HERE / "_rawclient.py"), "127.0.0.1", str(port)]
        argv += [self.model, str(s.streams), str(s.streams), "8", str(self.work / "warm.json")]
        run_client(argv, timeout_s=RUN_TIMEOUT_S, cpus={self.args.client_cpu})


def start_sim(s: Setting, model: str, work: Path, cpu: int) -> tuple[Server, int]:
    port = free_port()
    sim = Server(
        [
            sys.executable,
            "-m",
            "tui.sim",
            "serve",
            model,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--max-model-len",
            "2048",
            "--sim-speed",
            "100",
            "--disable-uvicorn-access-log",
            "--sim-fixed-ttft-ms",
            f"{s.ttft_ms:g}",
            "--sim-fixed-itl-ms",
            f"{s.itl_ms:g}",
        ],
        work / f"sim-{s.kind}-{s.streams}.log",
        cpus={cpu},
    )
    sim.wait_ready(f"http://127.0.0.1:{port}/health", timeout_s=60)
    return sim, port


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def fmt(values: Sequence[float], digits: int = 0) -> str:
    """Median, with the range when there are several runs."""
    if not values:
        return "-"
    mid = median(values)
    if len(values) == 1:
        return f"{mid:,.{digits}f}"
    return f"{mid:,.{digits}f} ({min(values):,.{digits}f}-{max(values):,.{digits}f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one repeat, one wave per run")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--client-cpu", type=int, default=1)
    parser.add_argument("--deadline", type=float, default=720.0, help="seconds for everything")
    args = parser.parse_args()
    terminate_on_sigterm()
    repeats = 1 if args.quick else max(1, args.repeats)
    found = find_provisioned()
    if found is None:
        print("vLLM is not provisioned (vtc setup-cpu-vllm): no vllm bench serve to compare")
        return 2
    allowed = os.sched_getaffinity(0)
    for cpu in (args.server_cpu, args.client_cpu):
        if cpu not in allowed:
            print(f"core {cpu} is not available here (allowed: {sorted(allowed)})")
            return 2
    deadline = time.monotonic() + args.deadline
    work = Path(tempfile.mkdtemp(prefix="vtc-loadgen-"))
    bench = Bench(args, work, found.python, str(found.model))
    results: dict[tuple[str, int, str], list[Sample]] = {}
    loads: list[float] = [os.getloadavg()[0]]
    print(
        f"vtc-sim on core {args.server_cpu}, each client on core {args.client_cpu}; "
        f"{repeats} repeat(s); files in {work}; {load_average()}",
        flush=True,
    )
    try:
        for s in settings():
            sim, port = start_sim(s, str(found.model), work, args.server_cpu)
            try:
                bench.warm_up(s, port)
                for rep in range(repeats):
                    shift = rep % len(s.clients)  # rotate: no client always runs first
                    for client in s.clients[shift:] + s.clients[:shift]:
                        if time.monotonic() > deadline:
                            raise RuntimeError("deadline reached; partial tables follow")
                        sample = bench.run(client, s, port)
                        loads.append(os.getloadavg()[0])
                        results.setdefault((s.kind, s.streams, client), []).append(sample)
                        print(progress_line(s, client, sample), flush=True)
            finally:
                sim.stop(grace_s=10)
    except RuntimeError as exc:
        print(f"stopped: {exc}")
    report(results, repeats)
    issue_table(results, loads)
    return 0


def progress_line(s: Setting, client: str, sample: Sample) -> str:
    line = (
        f"  {s.kind:<10} {s.streams:>5} streams  {LABELS[client]:<24} "
        f"{sample.tok_s:>9,.0f} tok/s  {sample.tok_per_cpu_s:>9,.0f} tok/cpu-s"
    )
    if sample.itl_err_p99 is not None and sample.ttft_err_p99 is not None:
        line += (
            f"  p99 |ITL err| {sample.itl_err_p99:6.2f} ms"
            f"  p99 TTFT err {sample.ttft_err_p99:7.2f} ms"
        )
    return line + f"  ({load_average()})"


def report(results: dict[tuple[str, int, str], list[Sample]], repeats: int) -> None:
    """The tables and the ratios ours / vllm bench serve."""

    def get(kind: str, streams: int, client: str) -> list[Sample]:
        return results.get((kind, streams, client), [])

    by_kind = {kind: [s for s in settings() if s.kind == kind] for kind in ("throughput", "timing")}
    first = by_kind["throughput"][0]
    print(
        f"\nThroughput: sim TTFT {first.ttft_ms:g} ms, ITL {first.itl_ms:g} ms, "
        f"{first.output_len} output tokens, all requests at once; median (min-max) of "
        f"{repeats} run(s)"
    )
    rows = [["streams", "client", "tok/s (wall)", "tok per client CPU-s", "client CPU %"]]
    for s in by_kind["throughput"]:
        for client in s.clients:
            samples = get(s.kind, s.streams, client)
            if samples:
                rows.append(
                    [
                        str(s.streams),
                        LABELS[client],
                        fmt([x.tok_s for x in samples]),
                        fmt([x.tok_per_cpu_s for x in samples]),
                        fmt([100 * x.cpu_s / x.duration for x in samples]),
                    ]
                )
    table(rows)
    print(
        "\nTiming: sim TTFT 100 ms, 12,800 tokens/s (ITL 20 ms at 256 streams, 80 ms at "
        "1024), 64 output tokens, arrivals at streams/2 per second; error against the "
        "injected delays"
    )
    rows = [["streams", "client", "p99 |ITL err| ms", "p50 |ITL err| ms", "p99 TTFT err ms"]]
    for s in by_kind["timing"]:
        for client in s.clients:
            samples = get(s.kind, s.streams, client)
            if samples:
                rows.append(
                    [
                        str(s.streams),
                        LABELS[client],
                        fmt([x.itl_err_p99 or 0.0 for x in samples], 2),
                        fmt([x.itl_err_p50 or 0.0 for x in samples], 2),
                        fmt([x.ttft_err_p99 or 0.0 for x in samples], 1),
                    ]
                )
    table(rows)

    def ratio(ours: list[float], theirs: list[float]) -> str:
        if not ours or not theirs or median(theirs) == 0:
            return "-"
        return f"{median(ours) / median(theirs):.2f}x"

    print("\nRatios, ours (vtc bench) / vllm bench serve, of the medians:")
    rows = [
        [
            "streams",
            "tok per CPU-s (higher better)",
            "tok/s wall",
            "p99 ITL err (lower better)",
            "p99 TTFT err (lower better)",
        ]
    ]
    for streams in CONCURRENCIES:
        ours_t, theirs_t = get("throughput", streams, "vtc"), get("throughput", streams, "vllm")
        ours_e, theirs_e = get("timing", streams, "vtc"), get("timing", streams, "vllm")
        rows.append(
            [
                str(streams),
                ratio([x.tok_per_cpu_s for x in ours_t], [x.tok_per_cpu_s for x in theirs_t]),
                ratio([x.tok_s for x in ours_t], [x.tok_s for x in theirs_t]),
                ratio(
                    [x.itl_err_p99 or 0.0 for x in ours_e], [x.itl_err_p99 or 0.0 for x in theirs_e]
                ),
                ratio(
                    [x.ttft_err_p99 or 0.0 for x in ours_e],
                    [x.ttft_err_p99 or 0.0 for x in theirs_e],
                ),
            ]
        )
    table(rows)


def issue_table(results: dict[tuple[str, int, str], list[Sample]], loads: list[float]) -> None:
    """Issue 12's table (medians), the goals checked, and the load average of the runs."""

    def med(kind: str, streams: int, client: str, attr: str) -> float:
        values = [getattr(x, attr) for x in results.get((kind, streams, client), [])]
        values = [v for v in values if v is not None]
        return median(values) if values else float("nan")

    print(
        "\nIssue 12's table (medians; errors against the injected delays; load average "
        f"{min(loads):.2f}-{max(loads):.2f}, median {median(loads):.2f}, on "
        f"{os.cpu_count()} cores):"
    )
    rows = [
        [
            "streams",
            "tokens per client CPU-s, vtc / bench serve",
            "tok/s wall",
            "p99 ITL error: vtc, bench serve, bare reader",
            "p99 TTFT error: vtc, bench serve, bare reader",
        ]
    ]
    checks: list[str] = []
    for streams, capacity_goal in zip(CONCURRENCIES, (1.5, 2.0), strict=True):
        cpu = med("throughput", streams, "vtc", "tok_per_cpu_s") / med(
            "throughput", streams, "vllm", "tok_per_cpu_s"
        )
        wall = med("throughput", streams, "vtc", "tok_s") / med(
            "throughput", streams, "vllm", "tok_s"
        )
        itl = [med("timing", streams, c, "itl_err_p99") for c in ("vtc", "vllm", "raw")]
        ttft = [med("timing", streams, c, "ttft_err_p99") for c in ("vtc", "vllm", "raw")]
        rows.append(
            [
                str(streams),
                f"{cpu:.2f}x",
                f"{wall:.2f}x",
                ", ".join(f"{v:.2f}" for v in itl) + " ms",
                ", ".join(f"{v:.1f}" for v in ttft) + " ms",
            ]
        )
        checks += [
            f"{streams}: capacity {cpu:.2f}x >= {capacity_goal}x: {_ok(cpu >= capacity_goal)}",
            f"{streams}: wall tok/s {wall:.2f}x >= 1x: {_ok(wall >= 1.0)}",
            f"{streams}: p99 ITL error {itl[0] / itl[2]:.2f}x the bare reader's (<= 1.2x) and "
            f"{itl[0] / itl[1]:.2f}x bench serve's (<= 1x): "
            f"{_ok(itl[0] <= 1.2 * itl[2] and itl[0] <= itl[1])}",
            f"{streams}: p99 TTFT error {ttft[0] / ttft[2]:.2f}x the bare reader's (<= 1.2x) and "
            f"{ttft[0] / ttft[1]:.2f}x bench serve's (<= 1x): "
            f"{_ok(ttft[0] <= 1.2 * ttft[2] and ttft[0] <= ttft[1])}",
        ]
    table(rows)
    print("\n".join(checks))


def _ok(flag: bool) -> str:
    return "met" if flag else "NOT MET"


if __name__ == "__main__":
    sys.exit(main())
