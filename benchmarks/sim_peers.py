"""``vllm bench serve`` against ``vtc-sim`` and against real vLLM: same counts, similar hits.

    python benchmarks/sim_peers.py [--num-prompts 200] [--input-len 256] [--output-len 64]
                                   [--skip-real]

For each server (the simulator serving the provisioned tiny Llama with its
``tokenizer.json``; then the real CPU build of vLLM 0.32 serving the same folder, unless
``--skip-real``), runs vLLM's own ``vllm bench serve`` twice with the random dataset:
once plain (no shared prefix) and once with ``--random-prefix-len`` (three quarters of
each prompt shared). It reports, per server and workload: whether bench serve printed a
``tokenizer mismatch`` warning (it must not: the simulator counts with the same
tokenizer), the server-side prompt tokens and bench serve's ``total_input_tokens`` (they
must agree), and the prefix-cache hit rate read from each server's ``/metrics`` deltas.

Both servers run the same cache geometry (block size 128, the CPU build's default, and a
64 MiB KV cache), so the hit rates compare. Needs ``vtc setup-cpu-vllm``; exits 2 without
it. Every process is stopped by process group (``_procs``). Runtime here: ~4 minutes.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from _procs import (
    REPO,
    Server,
    free_port,
    load_average,
    run_client,
    table,
    terminate_on_sigterm,
)

sys.path.insert(0, str(REPO))

from tui.server.provision import find_provisioned

CACHE = ["--block-size", "128", "--kv-cache-memory-bytes", "64M", "--max-model-len", "4096"]


def scrape(base: str) -> dict[str, float]:
    """The prefix-cache and prompt-token counters of ``base``'s /metrics."""
    with urllib.request.urlopen(base + "/metrics", timeout=10) as response:
        text = response.read().decode()
    wanted = (
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:prompt_tokens_total",
    )
    out = dict.fromkeys(wanted, 0.0)
    for line in text.splitlines():
        name = line.split("{", 1)[0]
        if name in out:
            out[name] += float(line.rsplit(" ", 1)[1])
    return out


def bench(vllm: Path, model: Path, base: str, args: argparse.Namespace, prefix: int) -> str:
    """One ``vllm bench serve`` run; its output (stdout and stderr)."""
    argv = [
        str(vllm),
        "bench",
        "serve",
        "--backend",
        "vllm",
        "--base-url",
        base,
        "--model",
        str(model),
        "--dataset-name",
        "random",
        "--random-input-len",
        str(args.input_len - prefix),
        "--random-prefix-len",
        str(prefix),
        "--random-output-len",
        str(args.output_len),
        "--num-prompts",
        str(args.num_prompts),
        "--request-rate",
        "inf",
        "--ignore-eos",
        "--seed",
        "0",
    ]
    env = {"HF_HUB_OFFLINE": "1"}
    return run_client(argv, timeout_s=args.timeout, env=env).stdout


def measure(name: str, server_argv: list[str], args: argparse.Namespace, logs: Path) -> list[str]:
    provisioned = find_provisioned()
    assert provisioned is not None
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = Server(
        [*server_argv, "--host", "127.0.0.1", "--port", str(port)],
        logs / f"{name}.log",
        env={"HF_HUB_OFFLINE": "1"},
    )
    rows = []
    try:
        server.wait_ready(base + "/health", args.ready_timeout)
        for label, prefix in (("random", 0), ("shared prefix", args.input_len * 3 // 4)):
            before = scrape(base)
            out = bench(provisioned.vllm, provisioned.model, base, args, prefix)
            after = scrape(base)
            delta = {k: after[k] - before[k] for k in after}
            queries = delta["vllm:prefix_cache_queries_total"]
            hits = delta["vllm:prefix_cache_hits_total"]
            served = delta["vllm:prompt_tokens_total"]
            client = re.search(r"Total input tokens:\s+(\d+)", out)
            done = re.search(r"Successful requests:\s+(\d+)", out)
            rows.append(
                [
                    name,
                    label,
                    done.group(1) if done else "?",
                    "yes" if "tokenizer mismatch" in out else "no",
                    f"{served:.0f}",
                    client.group(1) if client else "?",
                    f"{100 * hits / queries:.1f}%" if queries else "-",
                ]
            )
    finally:
        server.stop()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-prompts", type=int, default=200)
    parser.add_argument("--input-len", type=int, default=256)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--sim-speed", type=float, default=10.0)
    parser.add_argument("--skip-real", action="store_true", help="only the simulator")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--ready-timeout", type=float, default=300.0)
    args = parser.parse_args()
    provisioned = find_provisioned()
    if provisioned is None:
        print("needs the CPU build of vLLM: run `vtc setup-cpu-vllm` first", file=sys.stderr)
        return 2
    terminate_on_sigterm()
    model = str(provisioned.model)
    rows: list[list[str]] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sim-peers-") as tmp:
        logs = Path(tmp)
        sim = [sys.executable, "-m", "tui.sim", "serve", model, *CACHE]
        rows += measure("vtc-sim", [*sim, "--sim-speed", str(args.sim_speed)], args, logs)
        if not args.skip_real:
            real = [str(provisioned.vllm), "serve", model, "--enforce-eager", *CACHE]
            rows += measure("vLLM 0.32 CPU", real, args, logs)
    header = ["server", "prompts", "completed", "tokenizer warning", "server input tokens"]
    header += ["bench input tokens", "prefix hit rate"]
    table([header, *rows])
    print(f"{time.monotonic() - started:.0f} s; {load_average()}")
    return 0 if all(r[3] == "no" and r[4] == r[5] for r in rows if r[0] == "vtc-sim") else 1


if __name__ == "__main__":
    sys.exit(main())
