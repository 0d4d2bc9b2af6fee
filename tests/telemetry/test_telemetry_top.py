"""``vtc top``: one JSON report within its deadline whatever the endpoint does, and the
real numbers against the simulator under a load run by ``tui.load``."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fakes.metrics_server import serving

from tui.app import top as top_cli
from tui.app.cli import _parser
from tui.domain.workload import LoadProgress, LoadSpec
from tui.load.runner import LoadRunner

CAPTURE = Path(__file__).resolve().parent.parent / "captures" / "metrics_after_load.txt"
MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
DEADLINE_S = 10.0
SLACK_S = 20.0  # only absorbs a busy machine; without deadlines these never return


def run_top(*argv: str) -> tuple[int, dict[str, object], float]:
    args = _parser().parse_args(["top", *argv])
    out = io.StringIO()
    started = time.monotonic()
    code = top_cli.run(args, out)
    return code, json.loads(out.getvalue()), time.monotonic() - started


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000/metrics"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000/metrics"),
        ("http://h:1/metrics", "http://h:1/metrics"),
        ("https://h/custom/path", "https://h/custom/path"),
    ],
)
def test_metrics_url(url: str, expected: str) -> None:
    assert top_cli.metrics_url(url) == expected


def test_bad_url_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    args = _parser().parse_args(["top", "localhost:8000", "--once"])
    assert top_cli.run(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("vtc: metrics URL must be") and err.count("\n") == 1


@pytest.mark.parametrize("behaviour", ["trickle", "silent", "huge", "garbage", "huge_declared"])
def test_once_answers_down_within_the_deadline(behaviour: str) -> None:
    with serving(behaviour, interval_s=0.5) as server:  # type: ignore[arg-type]
        code, report, elapsed = run_top(server.base_url, "--once", "--json")
    assert code == 1
    assert report["state"] in ("down", "stale")
    reason = str(report["reason"])
    assert reason and "\n" not in reason and len(reason) <= 200
    assert set(report["latency_ms"]) >= {"ttft", "itl", "e2el", "queue"}  # type: ignore[arg-type]
    assert elapsed < DEADLINE_S + SLACK_S


def test_once_on_a_good_page_reports_every_field() -> None:
    with serving("page", body=CAPTURE.read_bytes()) as server:
        code, report, _ = run_top(server.base_url, "--once", "--json", "--interval", "0.2")
    assert code == 0 and report["state"] == "ok" and report["reason"] == ""
    latency = report["latency_ms"]
    assert isinstance(latency, dict)
    assert latency["ttft"]["p50"] == pytest.approx(20.0)  # lifetime: see the quantile tests
    for name in ("ttft", "itl", "e2el", "queue"):
        assert set(latency[name]) >= {"p50", "p90", "p99"}
    assert report["latency_window_s"] is None
    assert report["kv_cache_usage"] is not None and report["num_running"] == 0.0
    assert report["prompt_tokens_per_s"] == 0.0  # two scrapes of a static page: a rate of 0
    gpus = report["gpus"]
    assert isinstance(gpus, dict) and gpus["state"] in ("ok", "down")  # this machine's NVML


def test_a_page_that_goes_bad_after_a_good_one_is_not_ok() -> None:
    with serving("page", body=CAPTURE.read_bytes()) as server:

        async def flip() -> top_cli.TopReport:
            task = asyncio.create_task(top_cli.top_once(server.base_url, interval_s=1.0))
            while server.requests < 1:
                await asyncio.sleep(0.01)
            server.behaviour = "trickle"
            return await task

        report = asyncio.run(flip())
    assert report.state in ("down", "stale") and report.reason
    assert report.kv_cache_usage is not None and report.data_age_s is not None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def sim() -> Iterator[str]:
    port = _free_port()
    argv = [sys.executable, "-m", "tui.sim", "serve", MODEL, "--sim-gpu", "rtx3080-10gb"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--sim-speed", "2"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert proc.poll() is None, "the simulator exited during start-up"
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            raise AssertionError("the simulator did not become ready")
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


async def test_top_once_against_the_simulator_under_load(sim: str) -> None:
    spec = LoadSpec(num_prompts=2000, input_len=256, output_len=256, max_concurrency=32)
    runner = LoadRunner()
    done = asyncio.Event()

    def progress(p: LoadProgress) -> None:
        if p.done >= 8:
            done.set()

    load = asyncio.create_task(runner.run(spec, base_url=sim, model=MODEL, on_progress=progress))
    try:
        await asyncio.wait_for(done.wait(), 120)
        command = [sys.executable, "-m", "tui.cli", "top", sim, "--once", "--json"]
        result = await asyncio.to_thread(
            subprocess.run, command, capture_output=True, text=True, timeout=60
        )
    finally:
        await runner.cancel()
        await load
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["state"] == "ok"
    for name in ("ttft", "itl", "e2el", "queue"):
        q = report["latency_ms"][name]
        assert q["count"] >= 8 and q["p50"] is not None
        assert q["p50"] <= q["p90"] <= q["p99"]
    assert 0 < report["kv_cache_usage"] <= 1 and report["num_running"] >= 1
    assert report["generation_tokens_per_s"] > 0
    assert report["prefix_cache_hit_rate"] is None or 0 <= report["prefix_cache_hit_rate"] <= 1
    (gpu,) = report["gpus"]["devices"]  # the simulator's own DCGM gauges, from its page
    assert gpu["name"] == "NVIDIA GeForce RTX 3080" and gpu["memory_used_bytes"] > 0
