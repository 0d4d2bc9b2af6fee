"""The console's load agrees with ``vtc bench`` on one real vLLM server (issue 23).

The console's session (``vtc --vllm ... -- serve ...``, headless) runs its load in its own
process; ``vtc bench`` runs as the operator would run it. They alternate on one warm
server (console, bench, bench, console), while the console's event loop is kept busy the
way a slow UI would keep it (blocked 40 ms out of every 50). What must hold on a busy
2-core machine: every count and token total identical (same prompts, same server), the
console's result marked as the worker's, every load kept. The figures (throughput and
latencies within 15 %) are ``benchmarks/console_agreement.py``'s, on a quiet machine.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest
from realvllm_support import HANG_S, SETTLE_WAIT_S, STARTUP_TIMEOUT_S

from tui.domain.events import ServerState
from tui.domain.results import BenchResult
from tui.domain.workload import LoadSpec
from tui.modes import ConsoleOptions, build_session
from tui.server.provision import ProvisionedVllm
from tui.session import wait_for_state

# timed: two loads' figures against each other, alone (tests/suite_tiers.py)
pytestmark = [pytest.mark.realvllm, pytest.mark.timed]

SPEC = LoadSpec(input_len=64, output_len=32, num_prompts=32, max_concurrency=8, seed=3)
EXACT = ("completed", "failed", "total_input_tokens", "total_output_tokens", "num_prompts")


async def _vtc_bench(url: str, model: str, out_dir: Path, n: int) -> BenchResult:
    """``vtc bench`` with the console's workload, as its own process; its result file."""
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
        str(SPEC.input_len),
        "--random-output-len",
        str(SPEC.output_len),
        "--num-prompts",
        str(SPEC.num_prompts),
        "--max-concurrency",
        str(SPEC.max_concurrency),
        "--seed",
        str(SPEC.seed),
        "--save-result",
        "--result-dir",
        str(out_dir),
        "--result-filename",
        f"bench-{n}.json",
        "--disable-tqdm",
    ]
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), HANG_S)
    assert proc.returncode == 0, out.decode(errors="replace")[-2000:]
    data = json.loads((out_dir / f"bench-{n}.json").read_text())
    stats = {k: v for k, v in data.items() if k.endswith("_ms")}  # bench serve's flat keys
    return BenchResult.model_validate({**data, "stats": stats, "errors": []})


async def _busy_loop(stop: asyncio.Event) -> None:
    """A UI that hogs its loop: 40 ms blocked out of every 50 (what an in-loop load felt)."""
    while not stop.is_set():
        time.sleep(0.04)  # blocking on purpose: this is the console's loop being busy
        await asyncio.sleep(0.01)


async def test_the_consoles_load_agrees_with_vtc_bench_with_its_loop_busy(
    real_vllm: ProvisionedVllm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = str(real_vllm.model)
    serve_args = [
        "serve",
        model,
        "--enforce-eager",
        "--kv-cache-memory-bytes",
        "64M",
        "--max-model-len",
        "2048",
        "--no-enable-prefix-caching",
    ]
    options = ConsoleOptions(
        vllm=str(real_vllm.vllm),
        serve_args=serve_args,
        data_dir=tmp_path,
        startup_timeout=STARTUP_TIMEOUT_S,
        poll_interval_s=0.5,
    )
    session = build_session(options)
    console: list[BenchResult] = []
    bench: list[BenchResult] = []
    try:
        await session.start()
        await session.restart(session.info.initial_flags)
        state = await wait_for_state(
            session, {ServerState.READY, ServerState.FAILED}, SETTLE_WAIT_S
        )
        assert state is ServerState.READY
        url = session.base_url
        assert url is not None
        warm = await session.run_load(SPEC.model_copy(update={"num_prompts": 8}))
        assert warm is not None and warm.failed == 0, warm and warm.errors
        stop = asyncio.Event()
        busy = asyncio.create_task(_busy_loop(stop))
        try:
            for n, who in enumerate(("console", "bench", "bench", "console")):
                if who == "console":
                    result = await asyncio.wait_for(session.run_load(SPEC), HANG_S)
                    assert result is not None
                    console.append(result)
                else:
                    bench.append(await _vtc_bench(url, model, tmp_path, n))
        finally:
            stop.set()
            await busy
        runs = [r for r in session.runs if r.bench is not None]
    finally:
        await asyncio.wait_for(session.close(), HANG_S)

    assert {r.client for r in console} == {"vtc-worker"} and {r.client for r in bench} == {
        "vtc-bench"
    }
    for key in EXACT:  # the same prompts on the same server: the same counts
        values = {getattr(r, key) for r in (*console, *bench)}
        assert len(values) == 1, f"{key}: {values}"
    assert console[0].failed == 0 and console[0].completed == SPEC.num_prompts
    # Throughput and latency are compared in benchmarks/console_agreement.py, not here: on a
    # shared 2-core machine either client's figure swings 2-3x run to run (a ratio of 2.04
    # failed here once with the console the faster), which no fixed bound can tell from a bug.
    # Every load is kept: the warm-up and both measured loads are three results.
    assert [r.bench for r in runs] == [warm, *console]
    assert runs[0].load_of is None and {r.load_of for r in runs[1:]} == {runs[0].id}
