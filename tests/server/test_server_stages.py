"""Log-line parsing: vLLM's prefix, startup stages and the KV-cache report."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.domain.events import KvCacheReported, Stage, StageReached
from tui.server.stages import StageTracker, parse_kv_cache_line, split_prefix, stage_of

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def _feed(name: str) -> tuple[StageTracker, list[object]]:
    tracker = StageTracker()
    events: list[object] = []
    lines = (CAPTURES / name).read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        events += tracker.feed(line, float(i))
    return tracker, events


def test_split_prefix_of_a_vllm_record() -> None:
    rec = split_prefix(
        "(APIServer pid=17653) INFO 11-21 05:49:40 [entry.py:140] Starting vLLM server on "
        "http://127.0.0.1:8011"
    )
    assert rec.process == "APIServer"
    assert rec.pid == 17653
    assert rec.level == "INFO"
    assert rec.timestamp == "11-21 05:49:40"
    assert rec.source == "entry.py:140"
    assert rec.message == "Starting vLLM server on http://127.0.0.1:8011"


def test_split_prefix_keeps_traceback_indentation() -> None:
    rec = split_prefix(
        "(EngineCore pid=16736) ERROR 11-21 05:40:34 [core.py:1510]     raise ValueError("
    )
    assert rec.process == "EngineCore"
    assert rec.message == "    raise ValueError("


@pytest.mark.parametrize(
    ("line", "process", "message"),
    [
        ("INFO:     Started server process [1]", None, "INFO:     Started server process [1]"),
        (
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for CacheConfig",
            None,
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for CacheConfig",
        ),
        (
            "(VllmWorker-0 pid=17694) WARNING 11-21 05:49:39 [vllm.py:725] Model Runner V2",
            "VllmWorker-0",
            "Model Runner V2",
        ),
        (
            "(EngineCore_DP0 pid=9) plain print from a child",
            "EngineCore_DP0",
            "plain print from a child",
        ),
        ("INFO 11-21 05:49:40 [entry.py:140] no process part", None, "no process part"),
    ],
)
def test_split_prefix_variants(line: str, process: str | None, message: str) -> None:
    rec = split_prefix(line)
    assert rec.process == process
    assert rec.message == message


def test_kv_cache_line_cpu_with_separators() -> None:
    kv = parse_kv_cache_line(
        "(EngineCore pid=17672) INFO 11-21 05:49:39 [kv_cache_utils.py:2327] CPU KV cache size: "
        "2,097,152 tokens, Maximum concurrency for 4,096 tokens per request: 512.00x"
    )
    assert kv == KvCacheReported(
        device="CPU", tokens=2_097_152, max_model_len=4096, max_concurrency=512.0
    )


def test_kv_cache_line_gpu_plus_host() -> None:
    kv = parse_kv_cache_line(
        "GPU + host KV cache size: 428,480 tokens, Maximum concurrency for 8,192 tokens per "
        "request: 52.30x"
    )
    assert kv is not None
    assert kv.device == "GPU + host"
    assert kv.tokens == 428_480
    assert kv.max_concurrency == 52.3


def test_eager_capture_stages_in_order() -> None:
    tracker, events = _feed("startup_eager_kv64M.log")
    firsts: dict[Stage, StageReached] = {}
    for e in events:
        if isinstance(e, StageReached):
            firsts.setdefault(e.stage, e)
    assert list(firsts) == [Stage.LOADING_WEIGHTS, Stage.PROFILING, Stage.KV_CACHE, Stage.API_UP]
    kv = [e for e in events if isinstance(e, KvCacheReported)]
    assert kv == [KvCacheReported("CPU", 131_072, 4096, 32.0)]
    assert tracker.kv_cache == kv[0]
    assert firsts[Stage.API_UP].detail == "http://127.0.0.1:8011"
    assert firsts[Stage.PROFILING].detail == "0.06 of 8.34 GiB for KV cache (explicitly)"
    # "Loading weights took 0.00 seconds" refines the weights stage with its time.
    weights = [
        e for e in events if isinstance(e, StageReached) and e.stage is Stage.LOADING_WEIGHTS
    ]
    assert [w.detail for w in weights] == ["", "0.00 s"]
    assert tracker.current is Stage.API_UP


def test_pressure_capture_reports_the_small_cache() -> None:
    _, events = _feed("startup_pressure.log")
    kv = [e for e in events if isinstance(e, KvCacheReported)]
    assert kv == [KvCacheReported("CPU", 2048, 512, 4.0)]


def test_compiled_start_shows_the_compile_stage() -> None:
    tracker, events = _feed("fail_a1_maxlen65536_kvbytes16M.log")
    stages = [e.stage for e in events if isinstance(e, StageReached)]
    assert Stage.COMPILING in stages  # "Warming up model for the compilation..."
    assert Stage.KV_CACHE not in stages  # it failed before allocating
    assert tracker.current is Stage.PROFILING


@pytest.mark.parametrize(
    ("message", "stage", "detail"),
    [
        (
            "Model loading took 14.99 GiB memory and 5.123456 seconds",
            Stage.LOADING_WEIGHTS,
            "14.99 GiB in 5.123456 s",
        ),
        ("Loading weights took 4.20 seconds", Stage.LOADING_WEIGHTS, "4.20 s"),
        ("Loading model weights took 14.9888 GB", Stage.LOADING_WEIGHTS, "14.9888 GiB"),
        ("Starting to load model meta-llama/Llama-3.1-8B...", Stage.LOADING_WEIGHTS, ""),
        ("Available KV cache memory: 52.3 GiB", Stage.PROFILING, "52.3 GiB available for KV cache"),
        ("Memory profiling takes 6.12 seconds", Stage.PROFILING, "profiled in 6.12 s"),
        (
            "Initial free memory 78.5 GiB, reserved 20.0 GiB memory for KV Cache as specified by "
            "kv_cache_memory_bytes config and skipped memory profiling.",
            Stage.PROFILING,
            "",
        ),
        (
            "Auto set (6.5/8.34) GiB for KV cache on node 0, ",
            Stage.PROFILING,
            "6.5 of 8.34 GiB for KV cache (auto)",
        ),
        (
            "Auto-fit max_model_len: reduced from 131072 to 40960 to fit in available KV cache "
            "memory (5.0 GiB)",
            Stage.PROFILING,
            "max_model_len auto-fit 131072 -> 40960",
        ),
        (
            "GPU KV cache size: 428,480 tokens, Maximum concurrency for 8,192 tokens per request: "
            "52.30x",
            Stage.KV_CACHE,
            "428,480 tokens, 52.30x at 8,192 tokens per request",
        ),
        ("# GPU blocks: 27,000, # CPU blocks: 2048", Stage.KV_CACHE, "27,000 blocks"),
        ("torch.compile takes 25.3 s in total", Stage.COMPILING, "torch.compile 25.3 s"),
        (
            "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|##########| 67/67",
            Stage.COMPILING,
            "",
        ),
        (
            "Graph capturing finished in 12 secs, took 0.52 GiB",
            Stage.COMPILING,
            "graphs captured in 12 s, 0.52 GiB",
        ),
        ("Starting vLLM API server 0 on http://0.0.0.0:8000", Stage.API_UP, "http://0.0.0.0:8000"),
        (
            "Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
            Stage.API_UP,
            "http://0.0.0.0:8000",
        ),
    ],
)
def test_gpu_and_older_stage_lines(message: str, stage: Stage, detail: str) -> None:
    line = f"(Worker pid=7) INFO 11-21 10:00:00 [gpu_model_runner.py:1] {message}"
    hit = stage_of(line)
    assert hit is not None
    assert hit.stage is stage
    assert hit.detail == detail


def test_ordinary_lines_mark_no_stage() -> None:
    for line in (
        'INFO:     127.0.0.1:44760 - "GET /health HTTP/1.1" 200 OK',
        "(APIServer pid=1) INFO 11-21 05:49:27 [model.py:2152] Using max model len 4096",
        "",
    ):
        assert stage_of(line) is None


def test_tracker_reports_a_stage_once_then_only_new_details() -> None:
    tracker = StageTracker()
    first = tracker.feed("Capturing CUDA graphs (decode, FULL): 10%", 1.0)
    again = tracker.feed("Capturing CUDA graphs (decode, FULL): 90%", 2.0)
    done = tracker.feed("Graph capturing finished in 12 secs, took 0.52 GiB", 3.0)
    assert first == [StageReached(Stage.COMPILING, 1.0, "")]
    assert again == []
    assert done == [StageReached(Stage.COMPILING, 3.0, "graphs captured in 12 s, 0.52 GiB")]
    assert tracker.reached[Stage.COMPILING].elapsed == 1.0


def test_tracker_mark_is_idempotent() -> None:
    tracker = StageTracker()
    assert tracker.mark(Stage.LAUNCHING, 0.0) == StageReached(Stage.LAUNCHING, 0.0, "")
    assert tracker.mark(Stage.LAUNCHING, 5.0) is None
    assert tracker.current is Stage.LAUNCHING
