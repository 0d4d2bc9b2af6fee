"""Agreement with ``vllm bench serve`` against the same real vLLM CPU server.

    python benchmarks/agreement.py [--runs 3] [--paired] [--num-prompts N]

Starts the provisioned CPU vLLM 0.32.0 (``vtc setup-cpu-vllm``) with the tiny Llama
(prefix caching off, so that neither tool's prompts warm the cache for the other), then
runs ``vtc bench`` (``python -m tui.app.bench``) and that venv's
``vllm bench serve`` on the same random workload (same flags, same seed, the same
``--tokenizer``), after one unmeasured warm-up run of each (the first runs after a server
start pay one-off costs). It prints each run, then per tool the mean and spread of each
number, and checks what issue 12 asks: the same completed count and token totals, and
mean TTFT/TPOT/E2EL and the throughputs within 15% of each other. Exit code 0 when
every check holds, 1 otherwise, 2 when vLLM is not provisioned.

By default the tools *alternate*, one after the other, the order reversed from one run
to the next (ours-theirs, theirs-ours, ...: a drift of the server's speed over the
measurement weighs on both alike). With ``--paired`` each run is *paired* instead:
both tools run their workload at the same time against
the one server, so both measure the same server under the same conditions. Each is
stopped at a gate right before its timed run (ours just before it opens its connections;
bench serve, through ``_vllm_timed.py``, just after its last pre-run ``/metrics`` fetch)
and both are let go together, the second half a mean arrival gap after the first, the
leader alternating from run to run. The workload is an open loop (Poisson arrivals,
``--request-rate``, under a ``--max-concurrency`` cap): in a closed loop the two tools'
requests, sent the instant an earlier one finishes, race for the same engine step, and
the slightly quicker sender wins the earlier step every time, which biases TTFT by a step
(measured: +29% for whichever tool sends a fraction of a millisecond later). On a shared
2-core machine the server's speed swings by 2x from one minute to the next with what
other processes do, which can drown a comparison of runs taken one after the other; the
paired mode shows the two tools measuring the very same server. The server is pinned to
``--server-cpus`` and the clients to ``--client-cpus``.

Bounded: every client run has a timeout, the whole script a deadline; the server is
stopped by its process group (SIGTERM, then SIGKILL) whatever happens.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._procs import (
    REPO,
    Server,
    cpu_set,
    free_port,
    kill_group,
    load_average,
    load_json,
    run_client,
    spread,
    table,
    terminate_on_sigterm,
)
from benchmarks._reference import provisioned_or_say

HERE = Path(__file__).resolve().parent
KEYS = ("completed", "failed", "total_input_tokens", "total_output_tokens")
LATENCIES = ("mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms", "mean_itl_ms")
THROUGHPUTS = ("request_throughput", "output_throughput", "total_token_throughput")
TOLERANCE = 0.15
CLIENT_TIMEOUT_S = 240.0


def workload(args: argparse.Namespace, base_url: str, model: str, result: Path) -> list[str]:
    """The flags both tools get, spelled the same."""
    return [
        "--base-url",
        base_url,
        "--model",
        model,
        "--tokenizer",
        model,
        "--dataset-name",
        "random",
        "--random-input-len",
        str(args.input_len),
        "--random-output-len",
        str(args.output_len),
        "--num-prompts",
        str(args.num_prompts),
        "--max-concurrency",
        str(args.max_concurrency),
        "--request-rate",
        str(args.request_rate),
        "--seed",
        "0",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,90,99",
        "--save-result",
        "--result-filename",
        str(result),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--paired", action="store_true", help="run both tools at once instead of alternating"
    )
    parser.add_argument("--num-prompts", type=int, default=96)
    parser.add_argument("--max-concurrency", type=int, default=16)
    parser.add_argument(
        "--request-rate",
        type=float,
        default=3.0,
        help="requests/s per tool (Poisson, seed 0); an open loop keeps the paired runs "
        "from racing each other for the same engine steps",
    )
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--deadline", type=float, default=900.0, help="seconds for everything")
    parser.add_argument(
        "--server-cpus",
        default="0",
        help="cores for the vLLM server's processes (comma list, or 'any')",
    )
    parser.add_argument(
        "--client-cpus", default="1", help="cores for the client under test (or 'any')"
    )
    args = parser.parse_args()
    server_cpus, client_cpus = cpu_set(args.server_cpus), cpu_set(args.client_cpus)

    terminate_on_sigterm()
    found = provisioned_or_say()
    if found is None:
        return 2
    deadline = time.monotonic() + args.deadline
    work = Path(tempfile.mkdtemp(prefix="vtc-agreement-"))
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    model = str(found.model)
    env = {"HF_HUB_OFFLINE": "1"}
    server = Server(
        [
            str(found.vllm),
            "serve",
            model,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--enforce-eager",
            "--kv-cache-memory-bytes",
            "64M",
            "--max-model-len",
            "2048",
            "--no-enable-prefix-caching",
        ],
        work / "vllm-serve.log",
        env=env,
        cpus=server_cpus,
    )
    results: dict[str, list[dict[str, Any]]] = {"vtc bench": [], "vllm bench serve": []}
    try:
        print(f"starting vLLM {found.version} on {base_url} (log: {work / 'vllm-serve.log'})")
        server.wait_ready(f"{base_url}/health", timeout_s=180)
        ours = [sys.executable, "-m", "tui.app.bench", "--disable-tqdm"]
        theirs = [str(found.vllm), "bench", "serve", "--backend", "openai", "--disable-tqdm"]
        # (Alternating runs use the real `vllm bench serve` command; paired runs go through
        # _vllm_timed.py, the same CLI entry point with the start gate.)
        tools = {"vtc bench": ours, "vllm bench serve": theirs}
        names = list(tools)
        # Run -1 is an unmeasured warm-up: the server's first requests pay one-off costs.
        for run in range(-1, args.runs):
            if time.monotonic() > deadline:
                raise RuntimeError("deadline reached")
            tag = "warmup" if run < 0 else f"run{run}"
            paths = {name: work / f"{name.split()[0]}-{tag}.json" for name in tools}
            started = time.monotonic()
            if not args.paired:
                for name in names if run % 2 == 0 else names[::-1]:
                    run_client(
                        [*tools[name], *workload(args, base_url, model, paths[name])],
                        timeout_s=CLIENT_TIMEOUT_S,
                        env=env,
                        cpus=client_cpus,
                        log_path=paths[name].with_suffix(".log"),
                    )
            else:
                run_paired(
                    workload(args, base_url, model, paths["vtc bench"]),
                    workload(args, base_url, model, paths["vllm bench serve"]),
                    vllm_python=str(found.python),
                    env=env,
                    cpus=client_cpus,
                    logs=work,
                    tag=tag,
                    ours_first=run % 2 == 0,
                    offset_s=0.5 / args.request_rate if math.isfinite(args.request_rate) else 0.0,
                )
            for name in tools:
                data = load_json(paths[name])
                print(
                    f"  {name:<17} {tag:<6} {time.monotonic() - started:5.1f} s  "
                    f"completed {data['completed']}  mean TTFT {data['mean_ttft_ms']:.1f} ms  "
                    f"TPOT {data['mean_tpot_ms']:.2f} ms  E2EL {data['mean_e2el_ms']:.1f} ms  "
                    f"({load_average()})",
                    flush=True,
                )
                if run >= 0:
                    results[name].append(data)
    finally:
        server.stop()
    return report(results, args)


# Both tools stop right before their timed run, print VTC-READY and wait for a line on
# stdin. Ours: just before the runner opens its connections (prompts built, GC frozen);
# theirs: _vllm_timed.py with VTC_START_GATE=1 (after its last /metrics fetch).
GATE = """
import sys
from tui.load import runner
_make_transport = runner.LoadRunner._make_transport
def _gated(self, spec, url):
    print("VTC-READY", file=sys.stderr, flush=True)
    sys.stdin.readline()
    return _make_transport(self, spec, url)
runner.LoadRunner._make_transport = _gated
from tui.load import bench_cli
sys.exit(bench_cli.main(sys.argv[1:]))
"""
READY = "VTC-READY"


def run_paired(
    ours_flags: list[str],
    theirs_flags: list[str],
    *,
    vllm_python: str,
    env: dict[str, str],
    cpus: set[int] | None,
    logs: Path,
    tag: str,
    ours_first: bool,
    offset_s: float = 0.0,
) -> None:
    """Run both tools at once, released together at the start of their timed runs."""
    preexec = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    full_env = {**os.environ, **env, "PYTHONUNBUFFERED": "1", "VTC_START_GATE": "1"}
    commands = {
        "vtc": [sys.executable, "-c", GATE, "--disable-tqdm", *ours_flags],
        "vllm": [
            vllm_python,
            str(HERE / "_vllm_timed.py"),
            "--backend",
            "openai",
            "--disable-tqdm",
            *theirs_flags,
        ],
    }
    procs: dict[str, subprocess.Popen[str]] = {}
    ready = {name: threading.Event() for name in commands}
    threads: list[threading.Thread] = []
    try:
        for name, argv in commands.items():
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=full_env,
                cwd=REPO,
                start_new_session=True,
                preexec_fn=preexec,
            )
            procs[name] = proc
            log = logs / f"{name}-{tag}.log"
            thread = threading.Thread(target=_pump, args=(proc, log, ready[name]), daemon=True)
            thread.start()
            threads.append(thread)
        for name, event in ready.items():
            if not event.wait(timeout=CLIENT_TIMEOUT_S) or procs[name].poll() is not None:
                raise RuntimeError(f"{name} did not reach its start gate; see {logs}")
        # Release both together, the second offset_s after the first (half the mean gap
        # between arrivals: the two identical schedules interleave instead of landing
        # on the server in pairs that race for the same engine step); who leads
        # alternates from run to run.
        for n, name in enumerate(("vtc", "vllm") if ours_first else ("vllm", "vtc")):
            if n and offset_s > 0:
                time.sleep(offset_s)
            stdin = procs[name].stdin
            assert stdin is not None
            stdin.write("go\n")
            stdin.flush()
        for name, proc in procs.items():
            try:
                code = proc.wait(timeout=CLIENT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"{name} ran past {CLIENT_TIMEOUT_S:.0f} s") from None
            if code != 0:
                raise RuntimeError(f"{name} exited with {code}; see {logs}")
        for thread in threads:
            thread.join(timeout=10)
    finally:
        for proc in procs.values():
            kill_group(proc)


def _pump(proc: subprocess.Popen[str], log: Path, ready: threading.Event) -> None:
    """Copy a child's output to ``log``; set ``ready`` at its gate line (or its end)."""
    assert proc.stdout is not None
    with log.open("w", encoding="utf-8") as out:
        for line in proc.stdout:
            out.write(line)
            if READY in line:
                ready.set()
    ready.set()


def report(results: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> int:
    """Print the per-run and summary tables; 0 when every check holds."""
    names = list(results)
    print(
        f"\nWorkload: random, input {args.input_len}, output {args.output_len}, "
        f"{args.num_prompts} prompts at {args.request_rate:g} req/s (Poisson), max concurrency "
        f"{args.max_concurrency}, seed 0; "
        f"{args.runs} runs each, {'paired (simultaneous)' if args.paired else 'alternating'}; "
        f"server on cores {args.server_cpus}, "
        f"clients on cores {args.client_cpus}\n"
    )
    rows: list[list[str]] = [["number", *names, "ours / theirs"]]
    ok = True
    for key in KEYS:
        values = [[float(r[key]) for r in results[n]] for n in names]
        same = all(v == values[0][0] for vs in values for v in vs)
        ok &= same if key != "failed" else all(v == 0 for vs in values for v in vs)
        rows.append([key, *(spread(v) for v in values), "identical" if same else "DIFFER"])
    for key in LATENCIES + THROUGHPUTS:
        values = [[float(r[key]) for r in results[n]] for n in names]
        ratio = statistics.fmean(values[0]) / statistics.fmean(values[1])
        within = abs(ratio - 1.0) <= TOLERANCE
        if key != "mean_itl_ms":  # the criterion: TTFT, TPOT, E2EL and throughput
            ok &= within
        rows.append([key, *(spread(v) for v in values), f"{ratio:.3f} {'ok' if within else 'OFF'}"])
    table(rows)
    print(
        "\nspread: mean over the runs (min-max, ±half the range as % of the mean); "
        f"criterion: same counts and tokens, TTFT/TPOT/E2EL means and throughputs within "
        f"{TOLERANCE:.0%}"
    )
    print("AGREEMENT: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
