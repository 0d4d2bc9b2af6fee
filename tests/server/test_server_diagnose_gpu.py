"""diagnose() on the GPU texts of vllm-0.32-reference.md sections 1.5 and 2.

No GPU log was captured, so each test builds a small log from the reference's exact template
text, with vLLM's real line prefix where vLLM would print one.
"""

from __future__ import annotations

import pytest

from tui.domain.flags.serve import ServeFlags
from tui.server.diagnose import diagnose

API = "(APIServer pid=4100) {level} 11-21 10:00:00 [{src}] {msg}"
CORE = "(EngineCore_DP0 pid=4200) {level} 11-21 10:00:30 [{src}] {msg}"
WORKER = "(Worker pid=4300) {level} 11-21 10:00:20 [{src}] {msg}"

GPU_ENGINE_CONFIG = CORE.format(
    level="INFO",
    src="core.py:133",
    msg="Initializing a V1 LLM engine (v0.32.0) with config: model='meta-llama/Llama-3.1-8B', "
    "dtype=torch.bfloat16, max_seq_len=131072, tensor_parallel_size=1, kv_cache_dtype=auto, "
    "device_config=cuda, seed=0",
)
WRAPPER = (
    "RuntimeError: Engine core initialization failed. See root cause above. "
    "Failed core proc(s): {'EngineCore': 1}"
)
NON_DEFAULT = "non-default args: {{'model_tag': 'meta-llama/Llama-3.1-8B', {args}}}"


def _log(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def _api(msg: str, level: str = "INFO", src: str = "api_utils.py:286") -> str:
    return API.format(level=level, src=src, msg=msg)


def _core_error(msg: str) -> str:
    return CORE.format(level="ERROR", src="core.py:1510", msg=msg)


# -- section 1.5: validation errors ---------------------------------------------------------
@pytest.mark.parametrize(
    ("config", "field", "message", "value", "expected"),
    [
        (
            "CacheConfig",
            "gpu_memory_utilization",
            "Input should be less than or equal to 1 [type=less_than_equal, input_value=1.2, "
            "input_type=float]",
            1.2,
            1.0,
        ),
        (
            "CacheConfig",
            "gpu_memory_utilization",
            "Input should be greater than 0 [type=greater_than, input_value=0.0, input_type=float]",
            0.0,
            None,
        ),
        (
            "CacheConfig",
            "block_size",
            "Input should be greater than 0 [type=greater_than, input_value=0, input_type=int]",
            0,
            None,
        ),
        (
            "SchedulerConfig",
            "max_num_batched_tokens",
            "Input should be greater than or equal to 1 [type=greater_than_equal, "
            "input_value=0, input_type=int]",
            0,
            1,
        ),
        (
            "ParallelConfig",
            "tensor_parallel_size",
            "Input should be greater than or equal to 1 [type=greater_than_equal, "
            "input_value=0, input_type=int]",
            0,
            1,
        ),
        (
            "ParallelConfig",
            "pipeline_parallel_size",
            "Input should be greater than or equal to 1 [type=greater_than_equal, "
            "input_value=0, input_type=int]",
            0,
            1,
        ),
        (
            "ModelConfig",
            "max_model_len",
            "Input should be greater than or equal to -1 [type=greater_than_equal, "
            "input_value=-2, input_type=int]",
            -2,
            -1,
        ),
        (
            "UVAOffloadConfig",
            "cpu_offload_gb",
            "Input should be greater than or equal to 0 [type=greater_than_equal, "
            "input_value=-1.0, input_type=float]",
            -1.0,
            0.0,
        ),
    ],
)
def test_pydantic_range_errors(
    config: str, field: str, message: str, value: float, expected: float | None
) -> None:
    text = _log(
        "Traceback (most recent call last):",
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for " + config,
        field,
        "  " + message,
        "    For further information visit https://errors.pydantic.dev/2.13/v/less_than_equal",
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "invalid_flag_value"
    assert d.facts["config"] == config
    assert d.facts["flag"] == field
    assert d.facts["value"] == value
    # An inclusive bound is the nearest valid value; a strict one (> 0) unsets the flag.
    assert d.fixes[0].set == {field: expected}
    if isinstance(expected, float):
        assert isinstance(d.fixes[0].set[field], float)


def test_invalid_choice_offers_the_close_choice_and_the_default() -> None:
    text = _log(
        "usage: vllm serve [model_tag] [options]",
        "vllm serve: error: argument --kv-cache-dtype: invalid choice: 'fp8e4m3' (choose from "
        "'auto', 'bfloat16', 'float16', 'fp8', 'fp8_ds_mla', 'fp8_e4m3', 'fp8_e5m2')",
    )
    d = diagnose(text, exit_code=2)
    assert d.kind == "invalid_choice"
    assert d.facts["flag"] == "kv_cache_dtype"
    assert d.facts["value"] == "fp8e4m3"
    assert "fp8_e4m3" in d.facts["choices"]
    assert d.fixes[0].set == {"kv_cache_dtype": "fp8_e4m3"}
    assert d.fixes[1].set == {"kv_cache_dtype": None}


@pytest.mark.parametrize(
    ("line", "flag", "value"),
    [
        (
            "vllm serve: error: argument --max-num-seqs: invalid int value: 'lots'",
            "max_num_seqs",
            "lots",
        ),
        (
            "vllm serve: error: argument --gpu-memory-utilization/--device-memory-utilization: "
            "invalid float value: 'high'",
            "gpu_memory_utilization",
            "high",
        ),
        (
            "vllm serve: error: argument --kv-cache-memory-bytes: invalid human_readable_int "
            "value: '1.5G'",
            "kv_cache_memory_bytes",
            "1.5G",
        ),
        (
            "vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'two'",
            "tensor_parallel_size",
            "two",
        ),
    ],
)
def test_argparse_type_errors(line: str, flag: str, value: str) -> None:
    d = diagnose(_log(line), exit_code=2)
    assert d.kind == "invalid_flag_value"
    assert d.facts["flag"] == flag
    assert d.facts["value"] == value
    assert d.fixes[0].set == {flag: None}


def test_optional_value_not_convertible() -> None:
    d = diagnose(_log("ValueError: Value 12x cannot be converted to <class 'int'>."), exit_code=1)
    assert d.kind == "invalid_flag_value"
    assert d.facts["value"] == "12x"
    assert d.fixes == []


def test_scheduler_batched_tokens_below_max_model_len() -> None:
    text = _log(
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig",
        "  Value error, max_num_batched_tokens (2048) is smaller than max_model_len (8192). "
        "This effectively limits the maximum sequence length to max_num_batched_tokens and "
        "makes vLLM reject longer sequences. Please increase max_num_batched_tokens or "
        "decrease max_model_len. [type=value_error, input_value=ArgsKwargs(()), "
        "input_type=ArgsKwargs]",
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "invalid_flag_value"
    assert d.facts["flag"] == "max_num_batched_tokens"
    assert d.facts["value"] == 2048
    assert d.facts["max_model_len"] == 8192
    assert [f.set for f in d.fixes] == [
        {"max_num_batched_tokens": 8192},
        {"max_model_len": 2048},
        {"enable_chunked_prefill": True},
    ]


def test_scheduler_batched_tokens_below_max_num_seqs() -> None:
    text = _log(
        "  Value error, max_num_batched_tokens (128) must be greater than or equal to "
        "max_num_seqs (256). [type=value_error, input_value=ArgsKwargs(()), input_type=ArgsKwargs]"
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "invalid_flag_value"
    assert d.facts["limit"] == 256
    assert [f.set for f in d.fixes] == [{"max_num_batched_tokens": 256}, {"max_num_seqs": 128}]


def test_scheduler_active_seqs_above_max_num_seqs() -> None:
    text = _log("ValueError: max_num_active_seqs (512) cannot be greater than max_num_seqs (256).")
    d = diagnose(text, exit_code=1)
    assert d.kind == "invalid_flag_value"
    assert d.facts["value"] == 512
    assert d.fixes[0].set == {"max_num_seqs": 512}


def test_quantization_mismatch() -> None:
    text = _log(
        "  Value error, Quantization method specified in the model config (awq) does not match "
        "the quantization method specified in the `quantization` argument (gptq). "
        "[type=value_error, input_value=ArgsKwargs(()), input_type=ArgsKwargs]"
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "unknown_quantization"
    assert d.facts == {
        "quantization": "gptq",
        "checkpoint_quantization": "awq",
        "device": "unknown",
        "exit_code": 1,
    }
    assert [f.set for f in d.fixes] == [{"quantization": "awq"}, {"quantization": None}]


def test_unknown_quantization_method() -> None:
    text = _log(
        "  Value error, Unknown quantization method: gtpq. Must be one of ['awq', 'fp8', "
        "'gptq']. [type=value_error, input_value=ArgsKwargs(()), input_type=ArgsKwargs]"
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "unknown_quantization"
    assert d.facts["quantization"] == "gtpq"
    assert [f.set for f in d.fixes] == [{"quantization": "gptq"}, {"quantization": None}]


def test_quantization_refused_by_platform() -> None:
    text = _log("ValueError: fp8 quantization is currently not supported in ROCm.")
    d = diagnose(text, exit_code=1)
    assert d.kind == "unknown_quantization"
    assert d.facts["platform"] == "ROCm"
    assert d.fixes[0].set == {"quantization": None}


@pytest.mark.parametrize(("heads", "tp", "best"), [(32, 3, 2), (40, 16, 10), (28, 8, 7)])
def test_heads_not_divisible_by_tp(heads: int, tp: int, best: int) -> None:
    text = _log(
        f"  Value error, Total number of attention heads ({heads}) must be divisible by "
        f"tensor parallel size ({tp}). [type=value_error, input_value=ArgsKwargs(()), "
        "input_type=ArgsKwargs]"
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "tp_not_divisible"
    assert d.facts["num_attention_heads"] == heads
    assert d.facts["tensor_parallel_size"] == tp
    assert d.fixes[0].set == {"tensor_parallel_size": best}


WORLD = (
    "ValueError: World size (8) is larger than the number of available GPUs (4) in this node. "
    "If this is intentional and you are using:"
)


def test_world_size_exceeds_gpus() -> None:
    d = diagnose(_log(WORLD, "- ray, set '--distributed-executor-backend ray'."), exit_code=1)
    assert d.kind == "world_size_exceeds_gpus"
    assert d.facts["world_size"] == 8
    assert d.facts["gpu_count"] == 4
    assert d.fixes[0].set == {"tensor_parallel_size": 4}


def test_world_size_with_pipeline_stages_keeps_them_first() -> None:
    flags = ServeFlags(model="m", tensor_parallel_size=4, pipeline_parallel_size=2)
    d = diagnose(_log(WORLD), flags=flags, exit_code=1)
    assert [f.set for f in d.fixes] == [
        {"tensor_parallel_size": 2},
        {"tensor_parallel_size": 4, "pipeline_parallel_size": 1},
    ]


@pytest.mark.parametrize(
    "line",
    [
        "Requested sample logprobs of 30, which is greater than max allowed: 20",
        "This model's maximum context length is 4096 tokens. However, your prompt contains at "
        "least 5000 input tokens, which exceeds this limit even without any output tokens. "
        "Please reduce the length of the input prompt.",
    ],
)
def test_request_time_errors_are_not_startup_failures(line: str) -> None:
    # A 400 to one client is no reason for the server to have died: no kind, no fix.
    d = diagnose(
        _log(
            _api("Starting vLLM server on http://0.0.0.0:8000", src="entry.py:140"),
            _api(line, level="ERROR", src="serving.py:120"),
        ),
        exit_code=0,
    )
    assert d.kind == "unknown"
    assert d.fixes == []


def test_port_in_use_uvicorn_text() -> None:
    text = _log(
        "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): "
        "address already in use"
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "port_in_use"
    assert d.facts["port"] == 8000
    assert d.fixes[0].set == {"port": 8001}


# -- section 2.1: memory budget ----------------------------------------------------------------
def test_free_gpu_memory_below_requested_utilization() -> None:
    text = _log(
        GPU_ENGINE_CONFIG,
        WORKER.format(
            level="ERROR",
            src="multiproc_executor.py:953",
            msg="ValueError: Free memory on device cuda:0 (10.5/79.19 GiB) on startup is less "
            "than desired GPU memory utilization (0.92, 72.85 GiB). Decrease GPU memory "
            "utilization or reduce GPU memory used by other processes.",
        ),
        WRAPPER,
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "insufficient_free_memory"
    assert d.facts["free_gib"] == 10.5
    assert d.facts["total_gib"] == 79.19
    assert d.facts["requested_utilization"] == 0.92
    assert d.facts["requested_gib"] == 72.85
    assert d.facts["memory_location"] == "cuda:0"
    assert d.facts["device"] == "gpu"
    # floor((10.5 - 0.005) / (79.19 + 0.005), 0.01) = 0.13; 0.13 * 79.19 = 10.29 <= 10.5
    assert [f.set for f in d.fixes] == [{"gpu_memory_utilization": 0.13}]


def test_free_gpu_memory_older_text_without_device_name() -> None:
    text = _log(
        "ValueError: Free memory on device (14.1/79.2 GiB) on startup is less than desired GPU "
        "memory utilization (0.9, 71.28 GiB). Decrease GPU memory utilization or reduce GPU "
        "memory used by other processes."
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "insufficient_free_memory"
    assert d.fixes[0].set == {"gpu_memory_utilization": 0.17}


def test_cpu_kv_allocation_above_available() -> None:
    text = _log(
        "ValueError: Available memory on node 0 (3.2/8.34 GiB) on kv cache allocation is less "
        "than requested memory for kv (4.0 GiB)"
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "insufficient_free_memory"
    assert d.facts["free_gib"] == 3.2
    assert d.fixes[0].set == {"kv_cache_memory_bytes": 2**30}  # min(1 GiB, 3.2 GiB / 2)


@pytest.mark.parametrize(
    "line",
    [
        "Available KV cache memory: 52.3 GiB",
        "Initial free memory 78.5 GiB, reserved 20.0 GiB memory for KV Cache as specified by "
        "kv_cache_memory_bytes config and skipped memory profiling. This does not respect the "
        "gpu_memory_utilization config.",
        "Replace gpu_memory_utilization config with `--kv-cache-memory=56163811328` (52.31 GiB) "
        "to fit into requested memory, or `--kv-cache-memory=62914560000` (58.59 GiB) to fully "
        "utilize gpu memory. Current kv cache memory in use is 52.3 GiB.",
        "GPU KV cache size: 428,480 tokens, Maximum concurrency for 8,192 tokens per request: "
        "52.30x",
        "Auto-fit max_model_len: reduced from 131072 to 40960 to fit in available KV cache "
        "memory (5.0 GiB)",
    ],
)
def test_informational_memory_lines_are_no_failure(line: str) -> None:
    d = diagnose(
        _log(GPU_ENGINE_CONFIG, CORE.format(level="INFO", src="gpu_worker.py:760", msg=line)),
        exit_code=0,
    )
    assert d.kind == "unknown"
    assert d.fixes == []


# -- section 2.3: startup error templates -----------------------------------------------------
KV_TOO_SMALL = (
    "ValueError: To serve at least one request with the model's max seq len (131072), (16.0 GiB "
    "KV cache is needed, which is larger than the available KV cache memory (10.5 GiB). Based "
    "on the available memory, the estimated maximum model length is 85990. Try increasing "
    "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing "
    "`max_model_len` when initializing the engine. See "
    "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
)


def test_kv_cache_too_small_on_gpu_rounds_to_block_16() -> None:
    text = _log(GPU_ENGINE_CONFIG, _core_error(KV_TOO_SMALL), WRAPPER)
    d = diagnose(text, exit_code=1)
    assert d.kind == "kv_cache_too_small"
    assert d.facts["max_model_len"] == 131072
    assert d.facts["needed_gib"] == 16.0
    assert d.facts["available_gib"] == 10.5
    assert d.facts["estimated_max_model_len"] == 85990
    assert d.facts["block_size"] == 16
    assert d.fixes[0].set == {"max_model_len": 85984}  # 85990 rounded down to 16
    # No KV size was set: the explicit size that fits one request (+0.01 GiB of rounding).
    assert d.fixes[1].set == {"kv_cache_memory_bytes": 16395 * 2**20}


def test_kv_cache_too_small_scales_an_explicit_kv_size() -> None:
    flags = ServeFlags(model="m", max_model_len=131072, kv_cache_memory_bytes=10 * 2**30)
    d = diagnose(_log(_core_error(KV_TOO_SMALL)), flags=flags, exit_code=1)
    # 10 GiB held 85990 // 16 + 1 = 5375 blocks; 131072 tokens need 8192 + 1 blocks.
    expected = -(-(10 * 2**30 / 5375 * 8193) // 2**20) * 2**20
    assert d.fixes[1].set == {"kv_cache_memory_bytes": int(expected)}


def test_kv_cache_too_small_block_size_from_non_default_args() -> None:
    text = _log(
        _api(NON_DEFAULT.format(args="'block_size': 32, 'max_model_len': 131072")),
        _core_error(KV_TOO_SMALL),
    )
    d = diagnose(text, exit_code=1)
    assert d.facts["block_size"] == 32
    assert d.facts["block_size_source"] == "log"
    assert d.fixes[0].set == {"max_model_len": 85984}  # 2687 * 32


def test_kv_cache_too_small_older_v1_text_with_typo() -> None:
    text = _log(
        "ValueError: To serve at least one request with the models's max seq len (32768), "
        "(4.0 GiB KV cache is needed, which is larger than the available KV cache memory "
        "(2.5 GiB). Based on the available memory, the estimated maximum model length is 20480. "
        "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine."
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "kv_cache_too_small"
    assert d.fixes[0].set == {"max_model_len": 20480}


def test_kv_cache_too_small_oldest_text() -> None:
    text = _log(
        "ValueError: The model's max seq len (32768) is larger than the maximum number of "
        "tokens that can be stored in KV cache (13460). Try increasing `gpu_memory_utilization` "
        "or decreasing `max_model_len` when initializing the engine."
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "kv_cache_too_small"
    assert d.facts["kv_cache_tokens"] == 13460
    assert d.fixes[0].set == {"max_model_len": 13456}


def test_root_cause_wins_over_a_wrapper_printed_first() -> None:
    # Several processes write to one pipe: the wrapper may reach the log before the cause.
    text = _log(WRAPPER, GPU_ENGINE_CONFIG, _core_error(KV_TOO_SMALL))
    assert diagnose(text, exit_code=1).kind == "kv_cache_too_small"


def test_no_memory_for_cache_blocks_on_gpu() -> None:
    text = _log(
        GPU_ENGINE_CONFIG,
        WORKER.format(
            level="INFO", src="gpu_worker.py:760", msg="Available KV cache memory: -1.25 GiB"
        ),
        _core_error(
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine (this flag also controls CPU "
            "memory reservation on the CPU backend, despite its name). See "
            "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
        ),
    )
    d = diagnose(text, flags=ServeFlags(model="m", gpu_memory_utilization=0.8), exit_code=1)
    assert d.kind == "no_kv_cache_memory"
    assert d.facts["available_gib"] == -1.25
    assert d.fixes[0].set == {"gpu_memory_utilization": 0.85}


def test_cannot_auto_fit() -> None:
    text = _log(
        GPU_ENGINE_CONFIG,
        _core_error(
            "ValueError: Cannot auto-fit max_model_len: not enough GPU memory available to serve "
            "even a single token. Try increasing `gpu_memory_utilization`."
        ),
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "no_kv_cache_memory"
    assert d.fixes[0].set == {"gpu_memory_utilization": 0.97}  # default 0.92 + 0.05


def test_max_model_len_above_derived_after_rope_scaling() -> None:
    text = _log(
        "  Value error, User-specified max_model_len (200000) is greater than the derived "
        "max_model_len (max_position_embeddings=131072.0 or model_max_length=None in model's "
        "config.json). To allow overriding this maximum, set the env var "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. [type=value_error, input_value=ArgsKwargs(()), "
        "input_type=ArgsKwargs]"
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "max_model_len_exceeds_model"
    assert d.facts["derived_max_model_len"] == 131072
    assert d.fixes[0].set == {"max_model_len": 131072}


def test_max_model_len_above_tokenizer_model_max_length() -> None:
    text = _log(
        "ValueError: User-specified max_model_len (65536) is greater than the derived "
        "max_model_len (max_position_embeddings=131072.0 or model_max_length=32768 in model's "
        "config.json)."
    )
    d = diagnose(text, exit_code=1)
    assert d.facts["derived_max_model_len"] == 32768
    assert d.fixes[0].set == {"max_model_len": 32768}


def test_weights_oom() -> None:
    text = _log(
        GPU_ENGINE_CONFIG,
        WORKER.format(
            level="ERROR",
            src="gpu_model_runner.py:5141",
            msg="Failed to load model - not enough GPU memory. Try lowering "
            "--gpu-memory-utilization to free memory for weights, increasing "
            "--tensor-parallel-size, or using --quantization. See "
            "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more tips. "
            "(original error: CUDA out of memory. Tried to allocate 896.00 MiB. GPU 0 has a "
            "total capacity of 23.55 GiB of which 512.00 MiB is free.)",
        ),
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 896.00 MiB.",
        WRAPPER,
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "weights_oom"
    assert d.facts["tried_to_allocate_gib"] == 0.875
    assert d.facts["gpu_total_gib"] == 23.55
    assert d.facts["gpu_free_gib"] == 0.5
    # The model's 16-bit weights fit 23.55 GiB in fp8; the log shows no second GPU, so no
    # tensor parallel size is offered (issue 31: more GPUs only where the box has them).
    assert [f.set for f in d.fixes] == [{"quantization": "fp8"}]


def test_sampler_warmup_oom() -> None:
    text = _log(
        GPU_ENGINE_CONFIG,
        _core_error(
            "RuntimeError: CUDA out of memory occurred when warming up sampler with 256 dummy "
            "requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when "
            "initializing the engine."
        ),
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "out_of_memory"
    assert d.facts["dummy_requests"] == 256
    assert [f.set for f in d.fixes] == [
        {"max_num_seqs": 128},
        {"gpu_memory_utilization": 0.87},
    ]


def test_cuda_oom_during_graph_capture() -> None:
    text = _log(
        GPU_ENGINE_CONFIG,
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.19 GiB of which 1.50 GiB is free.",
    )
    flags = ServeFlags(model="m", gpu_memory_utilization=0.95, max_num_seqs=512)
    d = diagnose(text, flags=flags, exit_code=1)
    assert d.kind == "out_of_memory"
    assert d.facts["tried_to_allocate_gib"] == 2.0
    assert [f.set for f in d.fixes] == [
        {"gpu_memory_utilization": 0.9},
        {"max_num_seqs": 256},
    ]


def test_memory_profiling_inconsistency() -> None:
    text = _log(
        "AssertionError: Error in memory profiling. Initial free memory 70.2 GiB, current free "
        "memory 71.5 GiB. This happens when other processes sharing the same container release "
        "GPU memory while vLLM is profiling during initialization."
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "unknown"
    assert d.facts["initial_free_gib"] == 70.2
    assert d.facts["current_free_gib"] == 71.5
    assert "profiling" in d.summary


def test_engine_ready_timeout() -> None:
    text = _log(
        "TimeoutError: Timed out waiting for engine core processes to start. This is often "
        "caused by slow weight loading for large models. Waited 600s (configured by "
        "VLLM_ENGINE_READY_TIMEOUT_S)."
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "unknown"
    assert d.facts["waited_s"] == 600
    assert "600 s" in d.summary


def test_wrapper_alone_names_the_first_real_exception() -> None:
    text = _log(
        _core_error("EngineCore failed to start."),
        _core_error("RuntimeError: a failure no detector knows"),
        WRAPPER,
    )
    d = diagnose(text, exit_code=1)
    assert d.kind == "unknown"
    assert d.facts["error"] == "RuntimeError: a failure no detector knows"
    assert "no detector knows" in d.evidence
    assert "exit code 1" in d.summary


def test_killed_by_a_signal_is_named() -> None:
    d = diagnose(_log(GPU_ENGINE_CONFIG), exit_code=-9)
    assert d.kind == "unknown"
    assert d.facts["signal"] == "SIGKILL"
    assert "SIGKILL" in d.summary


def test_engine_dead_error_on_gpu() -> None:
    text = _log(
        GPU_ENGINE_CONFIG,
        CORE.format(level="ERROR", src="core.py:1512", msg="EngineCore encountered a fatal error."),
        CORE.format(
            level="ERROR",
            src="core.py:1512",
            msg="RuntimeError: CUDA error: an illegal memory access was encountered",
        ),
        API.format(
            level="ERROR",
            src="async_llm.py:906",
            msg="vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an "
            "issue. See stack trace (above) for the root cause.",
        ),
        'INFO:     127.0.0.1:45678 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error',
    )
    d = diagnose(text, exit_code=0)
    assert d.kind == "engine_died"
    assert d.facts["error"] == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert "illegal memory access" in d.summary
