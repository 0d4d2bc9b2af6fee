"""The console's own load against ``vtc bench`` on one real vLLM server (issue 23).

    python benchmarks/console_agreement.py                    # 4 + 4 runs, the UI busy
    python benchmarks/console_agreement.py --client in-loop   # the old in-loop load
    python benchmarks/console_agreement.py --runs 2 --num-prompts 32   # quicker

One real ``vllm serve`` (the compute-bound small Llama of ``vtc setup-cpu-vllm``,
``model_small``; ``--model tiny`` for the tiny one, whose timings are noise: TTFT read
0.49x on it and 1.02x on the small one, code unchanged, issue 27; ``--enforce-eager
--kv-cache-memory-bytes 64M --max-model-len 2048 --no-enable-prefix-caching``), warmed up
once. The console attaches to it (``vtc --attach URL``, built by the attach mode itself)
and runs headless in Textual's test harness with its UI busy: a board of 200 stored runs,
the charts opened, a key pressed every 50 ms while the load runs. Its ``b`` is
``session.run_load(spec)``, the load the console's ``b`` starts. ``vtc bench`` runs as its
own process with the same workload. The two alternate (console, bench, bench, console,
...), so the server's drift falls on both. The server's process tree is pinned to
``--server-cpus`` (default core 0) and the console with its load worker and ``vtc bench``
to ``--client-cpus`` (default core 1): on a GPU box the server's compute is on the GPU, not
on the cores the console uses; here the CPU build would otherwise share its cores with the
clients, which measures the box, not the client.

Printed: each run's figures, then per number the median over the runs of each client
(min-max) and the ratio of the medians console / vtc bench (the issue's own table reads
medians: one stray run on a shared machine must not decide it), for throughput and the
means and p99s of TTFT, TPOT, ITL and E2EL; the console's own CPU over its loads; the load
average before and after (``benchmarks/_quiet.py``). ``AGREEMENT: PASS`` when the counts
and token totals are identical and every ratio is within 15 % (the bound ``vtc bench``
holds against ``vllm bench serve``). ``--client in-loop`` swaps the worker for the old
in-process runner (the "before" figure); ``--no-ui`` drives the session without Textual.

Every process started here is stopped by its process group, also on Ctrl-C. Exit 0 when
the agreement holds, 1 when it does not, 3 when the machine was too busy for the figures
to count (load average above 1.5), 2 when the real vLLM is not provisioned.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from benchmarks._procs import (  # noqa: E402
    Server,
    cpu_set,
    free_port,
    load_average,
    pin_this_process,
    run_client,
    table,
    terminate_on_sigterm,
)
from benchmarks._quiet import QuietGate  # noqa: E402
from benchmarks._reference import add_model_option, reference_model  # noqa: E402
from tui.domain.events import ServerState  # noqa: E402
from tui.domain.flags.serve import ServeFlags  # noqa: E402
from tui.domain.results import BenchResult, RunRecord, RunStatus  # noqa: E402
from tui.domain.workload import LoadSpec  # noqa: E402
from tui.modes.options import ConsoleOptions  # noqa: E402
from tui.server.provision import find_provisioned  # noqa: E402
from tui.session import wait_for_state  # noqa: E402

NUMBERS = [
    "output_throughput",
    "request_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "p99_itl_ms",
    "mean_e2el_ms",
    "p99_e2el_ms",
]
EXACT = ["completed", "failed", "total_input_tokens", "total_output_tokens"]
GOAL = 0.15
BUSY_KEYS = ["right", "left", "down", "up", "t", "t", "h", "escape"]


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=4, help="runs of each client")
    p.add_argument("--num-prompts", type=int, default=64)
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--max-concurrency", type=int, default=16)
    p.add_argument("--client", choices=["worker", "in-loop"], default="worker")
    p.add_argument("--no-ui", action="store_true", help="drive the session without Textual")
    add_model_option(p)
    p.add_argument(
        "--server-cpus",
        default="0",
        help="cores of the vLLM server (its whole process tree); 'any' leaves it unpinned",
    )
    p.add_argument(
        "--client-cpus",
        default="1",
        help="cores of the console (UI, its load worker) and of vtc bench; 'any': unpinned",
    )
    p.add_argument(
        "--launched",
        action="store_true",
        help="the console launches the server (vtc --vllm ... -- serve), not attach",
    )
    return p.parse_args(argv)


def _bench_file(path: Path) -> BenchResult:
    data: dict[str, Any] = json.loads(path.read_text())
    stats = {k: v for k, v in data.items() if k.endswith("_ms")}  # bench serve's flat keys
    return BenchResult.model_validate({**data, "stats": stats, "errors": []})


def _vtc_bench(
    url: str, model: str, spec: LoadSpec, out: Path, n: int, cpus: set[int] | None
) -> BenchResult:
    argv = [
        sys.executable,
        "-m",
        "tui.cli",
        "bench",
        "--base-url",
        url,
        "--model",
        model,
        "--random-input-len",
        str(spec.input_len),
        "--random-output-len",
        str(spec.output_len),
        "--num-prompts",
        str(spec.num_prompts),
        "--max-concurrency",
        str(spec.max_concurrency),
        "--seed",
        str(spec.seed),
        "--save-result",
        "--result-dir",
        str(out),
        "--result-filename",
        f"bench-{n}.json",
        "--disable-tqdm",
    ]
    run_client(argv, timeout_s=600, cpus=cpus, env={"PYTHONPATH": str(ROOT)})
    return _bench_file(out / f"bench-{n}.json")


def board_history(data_dir: Path, model: str) -> None:
    """200 stored runs in ``data_dir``: the board the console opens with."""
    from tui.store.history import RunStore

    store = RunStore(data_dir / "runs.sqlite")
    for i in range(200):
        bench = BenchResult(
            completed=64,
            output_throughput=1000.0 + i,
            stats={"p99_ttft_ms": 50.0 + i, "mean_ttft_ms": 20.0 + i},
        )
        store.add(
            RunRecord(
                flags=ServeFlags(model=model, max_num_seqs=8 + i % 32),
                status=RunStatus.STOPPED,
                bench=bench,
                workload=LoadSpec(),
            )
        )
    store.close()


@dataclasses.dataclass(frozen=True)
class Target:
    """Where the console's loads go: a server at ``url`` (attach), or one it launches."""

    url: str
    data_dir: Path
    server_cpus: set[int] | None = None
    client_cpus: set[int] | None = None
    vllm: str = ""
    serve_args: list[str] = dataclasses.field(default_factory=list)


def console_session(url: str, data_dir: Path, client: str) -> Any:
    """The console's session attached to ``url`` (its load: ``worker`` or ``in-loop``)."""
    return _session(ConsoleOptions(attach=url, data_dir=data_dir, poll_interval_s=1.0), client)


def _session(options: Any, client: str) -> Any:
    from tui.load.runner import LoadRunner
    from tui.modes.attach import AttachMode
    from tui.modes.common import assemble
    from tui.modes.local import LocalVllmMode

    mode = AttachMode() if options.attach else LocalVllmMode()
    info, services = mode.parts(options)
    if client == "in-loop":  # the console before issue 23: the load on the UI's own loop
        services = dataclasses.replace(services, runner=LoadRunner())
    return assemble(info, services, poll_interval_s=options.poll_interval_s)


class ConsoleCpu:
    """The console process's own CPU seconds (its load worker excluded) over its loads."""

    def __init__(self) -> None:
        self.me = psutil.Process()
        self.cpu_s = 0.0
        self.wall_s = 0.0

    async def measure(self, coro: Any) -> Any:
        t0, c0 = time.monotonic(), sum(self.me.cpu_times()[:2])
        result = await coro
        self.cpu_s += sum(self.me.cpu_times()[:2]) - c0
        self.wall_s += time.monotonic() - t0
        return result


async def _press_while(pilot: Any, task: asyncio.Task[Any]) -> int:
    pressed = 0
    while not task.done():
        await pilot.press(BUSY_KEYS[pressed % len(BUSY_KEYS)])
        pressed += 1
        await asyncio.sleep(0.05)
    return pressed


async def _console_runs(
    target: Target, args: argparse.Namespace, spec: LoadSpec, schedule: list[str], bench: Any
) -> tuple[list[BenchResult], list[BenchResult], ConsoleCpu, int]:
    if args.launched:  # `vtc --vllm PATH -- serve ...`: the console starts the server
        options = ConsoleOptions(
            vllm=target.vllm,
            serve_args=target.serve_args,
            data_dir=target.data_dir,
            poll_interval_s=1.0,
            startup_timeout=300,
        )
        session = _session(options, args.client)
    else:
        session = console_session(target.url, target.data_dir, args.client)
    cpu, console, theirs, pressed = ConsoleCpu(), [], [], 0

    async def drive(pilot: Any) -> None:
        nonlocal pressed
        if args.launched:
            # The server's tree inherits the console's cores at its fork: launch it from the
            # server's cores, then move the console (every thread) to the clients' cores.
            pin_this_process(target.server_cpus)
            if session.current is None or session.state is ServerState.IDLE:
                await session.restart(session.info.initial_flags)
            ready = await wait_for_state(session, {ServerState.READY, ServerState.FAILED}, 330)
            pin_this_process(target.client_cpus)
            if ready is not ServerState.READY:
                raise SystemExit(f"the console's server did not start: {ready.value}")
        await asyncio.to_thread(bench, -1)  # one unmeasured warm-up of the server
        for n, who in enumerate(schedule):
            if who == "bench":
                theirs.append(await asyncio.to_thread(bench, n))
                continue
            task = asyncio.ensure_future(cpu.measure(session.run_load(spec)))
            if pilot is not None:
                pressed += await _press_while(pilot, task)
            result = await task
            if result is None:
                raise SystemExit("the console's load failed")
            console.append(result)
            print(
                f"  console run {len(console)}: {result.output_throughput:8.1f} tok/s, "
                f"p99 TTFT {result.stats.get('p99_ttft_ms', 0):.1f} ms ({load_average()})"
            )

    if args.no_ui:
        await session.start()
        try:
            await drive(None)
        finally:
            await session.close()
        return console, theirs, cpu, pressed
    from tui.ui.app import create_app
    from tui.ui.pacer import LOAD_REFRESH_S

    refresh = LOAD_REFRESH_S if args.client == "worker" else None  # as each console shipped
    app = create_app(session, clock=None, load_refresh_s=refresh)
    async with app.run_test(size=(160, 50)) as pilot:
        await drive(pilot)
        await session.close()
    return console, theirs, cpu, pressed


def _report(console: list[BenchResult], bench: list[BenchResult], gate: QuietGate) -> bool:
    """The table; every count identical and every ratio within :data:`GOAL`, each judged
    by ``gate`` (a miss remembered there)."""
    rows = [
        ["number", "console (median, min-max)", "vtc bench (median, min-max)", "console / bench"]
    ]
    ok = True
    for key in EXACT:
        counts, theirs = {getattr(r, key) for r in console}, {getattr(r, key) for r in bench}
        same = counts == theirs and len(counts) == 1
        ok &= same
        if not same:
            gate.missed.append(f"{key} differ")
        rows.append(
            [key, str(sorted(counts)), str(sorted(theirs)), "identical" if same else "DIFFER"]
        )
    ratios: dict[str, float] = {}
    for key in NUMBERS:
        ours = [v for r in console if (v := r.metric(key)) is not None]
        bench_values = [v for r in bench if (v := r.metric(key)) is not None]
        if not ours or not bench_values:
            rows.append([key, "-", "-", "-"])
            continue
        ratios[key] = statistics.median(ours) / statistics.median(bench_values)
        rows.append([key, _spread(ours), _spread(bench_values), f"{ratios[key]:.3f}"])
    table(rows)
    for key, ratio in ratios.items():  # |console / bench - 1| <= GOAL
        ok &= gate.check(f"{key}: console / bench - 1, absolute", abs(ratio - 1.0), goal=GOAL)
    return ok


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def _cores(cpus: set[int] | None) -> str:
    return ",".join(map(str, sorted(cpus))) if cpus else "any"


def _serve_args(model: str, port: int) -> list[str]:
    return [
        "serve",
        model,
        "--port",
        str(port),
        "--enforce-eager",
        "--kv-cache-memory-bytes",
        "64M",
        "--max-model-len",
        "2048",
        "--no-enable-prefix-caching",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison; 0 PASS, 1 FAIL, 3 busy machine, 2 without the real vLLM."""
    args = _args(argv)
    found = find_provisioned()
    if found is None:
        print("real vLLM not provisioned: run `vtc setup-cpu-vllm`", file=sys.stderr)
        return 2
    terminate_on_sigterm()
    gate = QuietGate("console_agreement")
    model = str(reference_model(found, args.model))
    spec = LoadSpec(
        input_len=args.input_len,
        output_len=args.output_len,
        num_prompts=args.num_prompts,
        max_concurrency=args.max_concurrency,
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server_cpus, client_cpus = cpu_set(args.server_cpus), cpu_set(args.client_cpus)
    schedule = ["console", "bench", "bench", "console"] * (args.runs // 2) + (
        ["console", "bench"] if args.runs % 2 else []
    )
    with tempfile.TemporaryDirectory(prefix="vtc-agree-") as tmp:
        work = Path(tmp)
        board_history(work / "data", model)
        server = None
        if not args.launched:  # attach: the server is started here, the console attaches
            server = Server(
                [str(found.vllm), *_serve_args(model, port)],
                work / "server.log",
                env={"HF_HUB_OFFLINE": "1"},
                cpus=server_cpus,
            )
            pin_this_process(client_cpus)
        target = Target(
            url, work / "data", server_cpus, client_cpus, str(found.vllm), _serve_args(model, port)
        )
        try:
            if server is not None:
                server.wait_ready(url + "/v1/models", 300)
            where = "launched by the console" if args.launched else "attached"
            print(
                f"client: {args.client}, UI: {'none' if args.no_ui else 'busy'}, "
                f"server: {where}; cores: server {_cores(server_cpus)}, "
                f"clients {_cores(client_cpus)}; {load_average()}"
            )
            console, bench, cpu, pressed = asyncio.run(
                _console_runs(
                    target,
                    args,
                    spec,
                    schedule,
                    lambda n: _vtc_bench(url, model, spec, work, n, client_cpus),
                )
            )
        finally:
            if server is not None:
                server.stop()
    gate.sample()
    ok = _report(console, bench, gate)
    share = 100.0 * cpu.cpu_s / cpu.wall_s if cpu.wall_s else 0.0
    print(
        f"console process CPU during its loads: {share:.1f}% of a core "
        f"({cpu.cpu_s:.1f} s over {cpu.wall_s:.1f} s; keys pressed: {pressed}; the load "
        f"{'in its own process' if args.client == 'worker' else 'on the UI loop'})"
    )
    print(f"{load_average()} at the end")
    print(f"AGREEMENT: {'PASS' if ok else 'FAIL'} (every ratio within {GOAL:.0%})")
    return gate.finish()


if __name__ == "__main__":
    sys.exit(main())
