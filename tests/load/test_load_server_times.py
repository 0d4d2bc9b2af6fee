"""vLLM 0.33's per-request metrics: the simulator sends them as 0.33 does, and ``vtc bench``
records ``server_ttfts``/``server_queue_times`` and the server's TTFT beside the client's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fakes.sim_process import SimProcess, sim_process

from tui.app.bench import main
from tui.domain.board.metrics import SERVER_TTFT_P50, TTFT_P50, table_metrics
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import BenchResult, RunRecord

MODEL = "meta-llama/Llama-3.2-1B-Instruct"
COMMON = ("--max-model-len", "2048", "--sim-speed", "50")


@pytest.fixture(scope="module")
def sim_033() -> Iterator[SimProcess]:
    with sim_process(MODEL, *COMMON, "--enable-per-request-metrics") as sim:
        sim.wait_ready()
        yield sim


def _last_usage_chunk(base: str, body: dict[str, object]) -> dict[str, object]:
    body = {"model": MODEL, "prompt": "hello there", "max_tokens": 4, "stream": True, **body}
    with httpx.stream("POST", base + "/v1/completions", json=body, timeout=30) as r:
        events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    last: dict[str, object] = json.loads(events[-2])
    return last


def test_the_last_usage_chunk_carries_the_servers_times(sim_033: SimProcess) -> None:
    last = _last_usage_chunk(sim_033.base, {"stream_options": {"include_usage": True}})
    assert last["choices"] == [] and "usage" in last
    metrics = last["metrics"]
    assert isinstance(metrics, dict)
    assert metrics["time_to_first_token_ms"] >= 0 and metrics["queue_time_ms"] >= 0
    # vLLM leaves them out when they cannot be attributed to one stream (n > 1).
    many = _last_usage_chunk(sim_033.base, {"stream_options": {"include_usage": True}, "n": 2})
    assert "metrics" not in many


def test_vllm_032_sends_no_per_request_metrics() -> None:
    with sim_process(
        MODEL, *COMMON, "--enable-per-request-metrics", "--sim-vllm-version", "0.32.0"
    ) as sim:
        sim.wait_ready()
        last = _last_usage_chunk(sim.base, {"stream_options": {"include_usage": True}})
    assert "usage" in last and "metrics" not in last


def test_vtc_bench_records_server_ttfts_and_queue_times(
    sim_033: SimProcess, tmp_path: Path
) -> None:
    code = main(
        [
            "--base-url",
            sim_033.base,
            "--model",
            MODEL,
            "--num-prompts",
            "6",
            "--random-input-len",
            "32",
            "--random-output-len",
            "8",
            "--disable-tqdm",
            "--save-result",
            "--result-dir",
            str(tmp_path),
            "--result-filename",
            "r.json",
        ]
    )
    assert code == 0
    data = json.loads((tmp_path / "r.json").read_text())
    assert len(data["server_ttfts"]) == 6 and len(data["server_queue_times"]) == 6
    assert all(isinstance(v, float) and v >= 0 for v in data["server_ttfts"])
    assert list(data).index("server_ttfts") > list(data).index("rtfx")  # bench serve's place
    assert data["median_server_ttft_ms"] >= 0
    # The board shows the server's TTFT beside the client's, only when a server reported it.
    bench = BenchResult(stats={"median_ttft_ms": 5.0, "median_server_ttft_ms": 3.0})
    with_server = RunRecord(flags=ServeFlags(model=MODEL), bench=bench)
    plain = RunRecord(flags=ServeFlags(model=MODEL), bench=BenchResult(stats={}))
    shown = table_metrics([with_server])
    assert shown.index(SERVER_TTFT_P50) == shown.index(TTFT_P50) + 1
    assert SERVER_TTFT_P50 not in table_metrics([plain])
