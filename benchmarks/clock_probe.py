"""Where a load client's timing error comes from, measured against the server's own clock.

    python benchmarks/clock_probe.py [--streams 256,1024] [--old-python PATH] [--repeats 1]

``loadgen.py`` measures each client's error against the delays it injects into vtc-sim,
so the simulator's own lateness (its core is shared too) is in every number. Here the
server is ``_metronome.py``: it writes each token on the same schedule (TTFT 100 ms, then
``streams / 12.8`` ms apart: 12,800 tokens/s) and puts in the token's text the moment it
*actually* wrote it (``perf_counter``, the same clock in every process on Linux). Each
client keeps the texts (``--save-detailed``), so for every token:

- the client's delay: its stamp minus the server's write, i.e. how long the bytes waited
  (in the kernel, then for the event loop) before the client stamped them;
- the client's share of an ITL error: the difference of two consecutive delays (the
  server's own gaps cancel out);
- the client's share of a TTFT error: the first delay plus the time its POST took to
  reach the server.

For vtc (this checkout and, with ``--old-python``, a venv of an older one: the hot path
before this change) it also records, through ``_probe_vtc.py``, every GC pause and every
once-a-second live-statistics harvest, and counts the late tokens (delay above the median
plus ``--late-ms``) whose wait overlapped one: what is left is the loop busy with other
reads, or the machine (other processes on the core).

Clients, each alone on ``--client-cpu``, the server on ``--server-cpu``: vtc bench (its own
transport), vtc bench over aiohttp, the old vtc bench, vllm bench serve (through
``_vllm_timed.py``), the bare reader. Bounded; every process stopped by its group.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._procs import Server, free_port, load_json, run_client, table, terminate_on_sigterm
from tui.server.provision import find_provisioned

HERE = Path(__file__).resolve().parent
WRITE = re.compile(r"w=([0-9.]+)")
ARRIVAL = re.compile(r"a=([0-9.]+)")


def flags(url: str, tokenizer: str, streams: int, waves: int, out: Path) -> list[str]:
    return [
        "--base-url",
        url,
        "--model",
        "metronome",
        "--tokenizer",
        tokenizer,
        "--dataset-name",
        "random",
        "--random-input-len",
        "32",
        "--random-output-len",
        "64",
        "--num-prompts",
        str(streams * waves),
        "--max-concurrency",
        str(streams),
        "--request-rate",
        str(streams / 2.0),
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,99",
        "--disable-tqdm",
        "--save-result",
        "--save-detailed",
        "--result-filename",
        str(out),
    ]


def tokens_of(data: dict[str, Any]) -> list[tuple[float, list[tuple[float, float]]]]:
    """Per request: ``(arrival - POST, [(stamp, write), ...])`` from a result file."""
    out = []
    if "reads" in data:  # the bare reader: each read's stamp and bytes
        for start, reads in zip(data["start_times"], data["reads"], strict=True):
            pairs, arrival = [], None
            for stamp, text in reads:
                arrival = arrival or next(iter(ARRIVAL.findall(text)), None)
                pairs += [(stamp, float(w)) for w in WRITE.findall(text)]
            if pairs and arrival:
                out.append((float(arrival) - start, pairs))
        return out
    for i, text in enumerate(data["generated_texts"]):
        if data["errors"][i]:
            continue
        writes = [float(w) for w in WRITE.findall(text)]
        arrival = ARRIVAL.findall(text)
        stamps = (
            data["start_times"][i]
            + data["ttfts"][i]
            + np.concatenate([[0.0], np.cumsum(data["itls"][i])])
        )
        if len(writes) == len(stamps) and arrival:
            pairs = list(zip(stamps, writes, strict=True))
            out.append((float(arrival[0]) - data["start_times"][i], pairs))
    return out


def analyse(
    data: dict[str, Any], spans: dict[str, list[list[float]]] | None, late_ms: float
) -> dict[str, Any]:
    requests = tokens_of(data)
    delays, gaps, firsts, posts, stamps = [], [], [], [], []
    for post, pairs in requests:
        d = [1000.0 * (s - w) for s, w in pairs]
        delays += d
        stamps += [s for s, _ in pairs]
        gaps += list(np.abs(np.diff(d)))
        firsts.append(d[0] + 1000.0 * post)
        posts.append(1000.0 * post)
    delay = np.array(delays)
    row: dict[str, Any] = {
        "tokens": len(delay),
        "delay p50": np.percentile(delay, 50),
        "delay p99": np.percentile(delay, 99),
        "delay max": delay.max(),
        "ITL err p99": np.percentile(gaps, 99),
        "TTFT err p99": np.percentile(firsts, 99),
        "POST p99": np.percentile(posts, 99),
        "cpu/token us": 1e6 * float(data.get("client_cpu_s", 0.0)) / max(1, len(delay)),
    }
    if spans is not None:
        late = delay > np.percentile(delay, 50) + late_ms
        hi = np.array(stamps)[late]
        lo = hi - delay[late] / 1000.0
        explained = np.zeros(int(late.sum()), dtype=bool)
        for name, intervals in spans.items():
            hit = np.zeros(len(lo), dtype=bool)
            for start, end in intervals:
                hit |= (start <= hi) & (end >= lo)
            explained |= hit
            longest = max((e - s for s, e in intervals), default=0.0)
            row[f"{name}"] = f"{hit.sum()} ({len(intervals)}, max {1000 * longest:.1f} ms)"
        row["late"] = int(late.sum())
        row["other"] = int((~explained).sum())
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="256,1024")
    parser.add_argument("--waves", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--old-python", default=None, help="python of a venv with older vtc")
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--client-cpu", type=int, default=1)
    parser.add_argument("--late-ms", type=float, default=2.0)
    parser.add_argument("--only", default="", help="comma list of client names to run")
    args = parser.parse_args()
    terminate_on_sigterm()
    found = find_provisioned()
    if found is None:
        print("vLLM is not provisioned (vtc setup-cpu-vllm): no vllm bench serve to compare")
        return 2
    work = Path(tempfile.mkdtemp(prefix="vtc-clock-probe-"))
    print(f"files in {work}; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    rows = [
        [
            "streams",
            "client",
            "tokens",
            "delay p50/p99/max ms",
            "ITL err p99",
            "TTFT err p99",
            "POST p99",
            "CPU/token",
            "late: gc / live stats / other",
        ]
    ]
    loads = []
    for streams in [int(s) for s in args.streams.split(",")]:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = Server(
            [sys.executable, str(HERE / "_metronome.py"), str(port), "100", f"{streams / 12.8}"],
            work / f"metronome-{streams}.log",
            cpus={args.server_cpu},
        )
        try:
            server.wait_ready(f"{url}/v1/models", timeout_s=30)
            probe, py = str(HERE / "_probe_vtc.py"), sys.executable
            clients: dict[str, list[str]] = {
                "vtc bench": [py, probe, "{spans}", "--transport", "native"],
                "vtc bench (aiohttp)": [py, probe, "{spans}", "--transport", "aiohttp"],
                "vllm bench serve": [
                    str(found.python),
                    str(HERE / "_vllm_timed.py"),
                    "--backend",
                    "openai",
                ],
                "bare reader": [py, str(HERE / "_rawclient.py")],
            }
            if args.old_python:
                clients["vtc bench (before)"] = [args.old_python, probe, "{spans}"]
            if args.only:
                wanted = {w.strip() for w in args.only.split(",")}
                clients = {k: v for k, v in clients.items() if k in wanted}
            for rep in range(args.repeats):
                for name, argv in clients.items():
                    out = work / f"{streams}-{name.replace(' ', '_')}-{rep}.json"
                    spans_path = out.with_suffix(".spans.json")
                    argv = [a.replace("{spans}", str(spans_path)) for a in argv]
                    if name == "bare reader":
                        n = str(streams * args.waves)
                        argv += [
                            "127.0.0.1",
                            str(port),
                            "metronome",
                            str(streams),
                            n,
                            "64",
                            str(out),
                            str(streams / 2.0),
                        ]
                    else:
                        argv += flags(url, str(found.model), streams, args.waves, out)
                    run_client(
                        argv,
                        timeout_s=300,
                        cpus={args.client_cpu},
                        env={"VTC_KEEP_READS": "1", "HF_HUB_OFFLINE": "1"},
                        log_path=out.with_suffix(".log"),
                    )
                    loads.append(os.getloadavg()[0])
                    spans = load_json(spans_path) if spans_path.exists() else None
                    row = analyse(load_json(out), spans, args.late_ms)
                    rows.append(
                        [
                            str(streams),
                            name,
                            str(row["tokens"]),
                            f"{row['delay p50']:.2f}/{row['delay p99']:.2f}/{row['delay max']:.1f}",
                            f"{row['ITL err p99']:.2f}",
                            f"{row['TTFT err p99']:.2f}",
                            f"{row['POST p99']:.2f}",
                            f"{row['cpu/token us']:.1f} us",
                            (
                                f"{row['gc']} / {row['live stats']} / {row['other']} "
                                f"of {row['late']}"
                                if spans is not None
                                else "-"
                            ),
                        ]
                    )
                    print("  " + "  ".join(rows[-1]), f"(load average {loads[-1]:.2f})", flush=True)
        finally:
            server.stop(grace_s=5)
    print(
        f"\nClient's own delay and error (ms), against the server's write times; load "
        f"average {min(loads):.2f}-{max(loads):.2f} during the runs\n"
    )
    table(rows)
    return 0


if __name__ == "__main__":
    t0 = time.monotonic()
    code = main()
    print(f"({time.monotonic() - t0:.0f} s)")
    sys.exit(code)
