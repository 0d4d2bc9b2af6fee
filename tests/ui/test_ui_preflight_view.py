"""Pre-flight warnings sit under the field they name, not above the whole form."""

from __future__ import annotations

from tui.session.preflight import CHUNKED_PREFILL_OFF
from tui.ui.preflight_view import place_warnings

FIELDS = [
    "model",
    "max_model_len",
    "gpu_memory_utilization",
    "block_size",
    "quantization",
    "max_num_batched_tokens",
    "extra_args",
]


def test_each_warning_goes_under_the_first_field_it_names() -> None:
    kv = "max_model_len 30576 cannot fit: about 21,888 tokens of KV; largest that fits: 21888"
    util = (
        "only 8.1 GiB free on GeForce RTX 3080 (after the CUDA context), below the 9.0 GiB "
        "that --gpu-memory-utilization 0.9 asks for: vLLM refuses to start"
    )
    weights = "weights need 16 GiB per GPU but only 9 GiB is free: Use --quantization or more GPUs"
    odd = "pre-flight check failed: NVML Shared Library Not Found"
    placed = place_warnings([kv, util, weights, CHUNKED_PREFILL_OFF, odd], FIELDS)
    assert placed.by_field["max_model_len"] == [kv]
    assert placed.by_field["gpu_memory_utilization"] == [util]
    assert placed.by_field["quantization"] == [weights]
    # names max_num_batched_tokens before max_model_len: the flag to set sits first
    assert placed.by_field["max_num_batched_tokens"] == [CHUNKED_PREFILL_OFF]
    assert placed.general == [odd]  # names no field: the form-wide box keeps it


def test_a_name_inside_another_name_is_not_a_match() -> None:
    placed = place_warnings(["--max-model-len-x is unknown"], ["max_model_len"])
    assert placed.by_field == {} and placed.general == ["--max-model-len-x is unknown"]
