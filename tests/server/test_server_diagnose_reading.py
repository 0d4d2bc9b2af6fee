"""The log reader under the detectors: prefixes of every origin, wraps, the run's own records."""

from __future__ import annotations

import pytest

from tui.server.diagnose import diagnose
from tui.server.diagnose.reading import (
    HEAD_CHARS,
    MAX_CHARS,
    TAIL_CHARS,
    LogView,
    bound_text,
    clean_line,
    tolerant,
)

MSG = "ValueError: something"


@pytest.mark.parametrize(
    ("line", "headed", "level"),
    [
        (f"(EngineCore pid=4200) ERROR 11-21 10:00:30 [core.py:1510] {MSG}", True, "ERROR"),
        (f"(EngineCore_DP0 pid=9) ERROR 09-16 17:46:22.123 [core.py:708] {MSG}", True, "ERROR"),
        (f"ERROR 04-19 17:25:10 llm_engine.py:100] {MSG}", True, "ERROR"),  # vLLM 0.4-0.6
        (f"ERROR [core.py:1510] {MSG}", True, "ERROR"),  # timestamp trimmed
        (f"10:00:30 [core.py:1510] {MSG}", True, None),  # level and date trimmed
        (f"[core.py:1510] {MSG}", True, None),
        (f"> (EngineCore pid=1) INFO 11-21 10:00:00 [a.py:1] {MSG}", True, "INFO"),  # quoted
        (f">> > {MSG}", False, None),  # quoted twice
        (f"vllm-1  | ERROR 11-18 18:07:28 engine.py:366] {MSG}", True, "ERROR"),  # compose
        (
            f"2024-05-01T10:00:00.123456Z (APIServer pid=7) INFO 05-01 10:00:00 [a.py:1] {MSG}",
            True,
            "INFO",
        ),  # kubectl/docker --timestamps
        (f"[2026-02-24T20:21:58Z] (EngineCore_DP0 pid=6940) {MSG}", False, None),  # CI
        (f"May 01 10:00:00 host vllm[123]: INFO 05-01 10:00:00 [a.py:1] {MSG}", True, "INFO"),
        (f"[rank0]: {MSG}", False, None),  # torchrun
        (f"2024-04-27 10:13:05 | ERROR | stderr | {MSG}", False, None),  # FastChat
        (
            "(RayWorkerWrapper pid=773, ip=10.0.0.2) ERROR 03-05 17:44:06 "
            f"worker_base.py:574] {MSG}",
            True,
            "ERROR",
        ),
        (f"\x1b[1;31mERROR\x1b[0m 11-21 10:00:30 [core.py:1] {MSG}\r", True, "ERROR"),  # colour
        (f"\ufeff\u200b{MSG}\x00", False, None),  # BOM, zero-width, NUL
    ],
)
def test_every_prefix_comes_off(line: str, headed: bool, level: str | None) -> None:
    cleaned = clean_line(line)
    assert cleaned.message == MSG
    assert cleaned.headed is headed
    assert cleaned.level == level


def test_lines_glued_by_a_lost_break_are_split_at_each_process_prefix() -> None:
    glued = (
        "raise OSError((APIServer pid=3041) OSError: Qwen/Q is not a local folder and is not a "
        "valid model identifier(APIServer pid=3041) If this is a private repository, pass a token"
    )
    view = LogView(glued, None, None)
    assert [p.message for p in view.physical][1].startswith("OSError: Qwen/Q is not")
    assert len(view.physical) == 3


def test_a_hard_wrapped_message_is_one_logical_line_again() -> None:
    line = (
        "(EngineCore pid=1) ERROR 11-21 10:00:30 [core.py:1] ValueError: To serve at least one "
        "request with the model's max seq len (30576), (3.73 GiB KV cache is needed, which is "
        "larger than the available KV cache memory (0.11 GiB)."
    )
    wrapped = [line[i : i + 60] for i in range(0, len(line), 60)]  # a terminal 60 columns wide
    text = "\n".join([*wrapped, "(EngineCore pid=1) ERROR 11-21 10:00:30 [core.py:1] next"]) + "\n"
    view = LogView(text, None, 1)
    assert view.logical[0].startswith("ValueError: To serve at least one request with the")
    assert view.logical[0].endswith("memory (0.11 GiB).")
    assert view.logical[1] == "next"


def test_non_default_args_survive_a_wrap() -> None:
    text = (
        "(APIServer pid=1) INFO 11-21 05:48:04 [api_utils.py:286] non-default args: {'model_tag'"
        ": '/m', 'host': '127.0.0.1', \n'port': 8011, 'model': '/m', 'kv_cache_memory_bytes': 6"
        "7108864}\n"
    )
    view = LogView(text, None, None)
    assert view.non_default_args["kv_cache_memory_bytes"] == 67108864
    assert view.explicit("kv_cache_memory_bytes")
    assert not view.explicit("block_size")


def test_older_servers_args_namespace_and_engine_config_are_read() -> None:
    text = (
        "INFO 04-19 17:25:10 api_server.py:149] vLLM API server version 0.4.0.post1\n"
        "INFO 04-19 17:25:10 api_server.py:150] args: Namespace(host=None, port=8001, "
        "model='/data/qwen', dtype='auto', max_model_len=512, block_size=16, "
        "gpu_memory_utilization=0.9, quantization=None, tensor_parallel_size=2)\n"
        "INFO 04-19 17:25:11 llm_engine.py:87] Initializing an LLM engine (v0.4.0.post1) with "
        "config: model='/data/qwen', dtype=torch.float16, max_seq_len=512, "
        "tensor_parallel_size=2, quantization=None, device_config=cuda, seed=0)\n"
    )
    view = LogView(text, None, None)
    assert view.version == "0.4.0.post1"
    assert view.value("port") == 8001 and view.value("tensor_parallel_size") == 2
    assert view.explicit("port") and not view.explicit("gpu_memory_utilization")  # 0.9 default
    assert view.engine_config["dtype"] == "float16"
    assert view.engine_config["max_model_len"] == 512
    assert view.device == "gpu"


def test_tolerant_patterns_ignore_how_whitespace_was_broken() -> None:
    pattern = tolerant(r"estimated maximum model length is (?P<n>\d+)", "estimated maximum")
    for text in (
        "the estimated maximum model length is 85990.",
        "the estimated\nmaximum model length is 85990.",
        "the estimatedmaximum modellength is85990.",  # spaces lost at the breaks
        "The Estimated Maximum Model Length Is 85990.",  # retyped
    ):
        view = LogView(text, None, None)
        found = view.find(pattern)
        assert found is not None and found[0].group("n") == "85990"


def test_needles_skip_logs_that_cannot_match() -> None:
    pattern = tolerant(r"(?P<x>.)", "a needle nowhere")
    assert LogView("x" * 1000, None, None).find(pattern) is None


def test_long_text_keeps_head_and_tail() -> None:
    text = "H" * HEAD_CHARS + "M" * 3 * TAIL_CHARS + "T" * TAIL_CHARS
    kept, omitted = bound_text(text)
    assert omitted == len(text) - MAX_CHARS
    assert kept.startswith("H" * HEAD_CHARS) and kept.endswith("T" * TAIL_CHARS)
    assert "characters of the log left out" in kept


def test_diagnose_reads_the_tail_of_an_oversized_text() -> None:
    failure = (
        "ValueError: Total number of attention heads (52) must be divisible by tensor parallel "
        "size (8).\n"
    )
    text = "INFO 11-21 10:00:00 [a.py:1] loading\n" * (MAX_CHARS // 30) + failure
    d = diagnose(text, exit_code=1)
    assert d.kind == "tp_not_divisible"
    assert d.fixes[0].set == {"tensor_parallel_size": 4}


@pytest.mark.parametrize("text", ["", "\n\n\n", "no newline at the end", "\r\n" * 5])
def test_degenerate_texts(text: str) -> None:
    d = diagnose(text)
    assert d.kind == "unknown"
    assert d.failure_found is False
