"""Every start-up error: exit code and vLLM's exact sentences, in vLLM's output shapes.

Runs ``tui.sim.cli.run`` in-process at a very high ``--sim-speed`` (failing starts never
serve, so no server stays up). The real CPU captures are the reference for the shapes.
"""

from __future__ import annotations

import io
import re
import socket
from pathlib import Path

import pytest

from tui.domain.vllm_release import release_of
from tui.sim.cli import run
from tui.sim.versions import DEFAULT_SIM_VLLM_VERSION

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
ENGINE_FAILED = (
    "RuntimeError: Engine core initialization failed. See root cause above. "
    "Failed core proc(s): {'EngineCore': 1}"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sim(*args: str, speed: str = "2000") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = ["serve", *args, "--host", "127.0.0.1", "--port", str(free_port()), "--sim-speed", speed]
    code = run(argv, out=out, err=err, install_signals=False)
    return code, out.getvalue(), err.getvalue()


def capture_tail(name: str, start: str) -> list[str]:
    """The capture's lines from the first one that starts with ``start``."""
    lines = (CAPTURES / name).read_text(encoding="utf-8").splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(start))
    return lines[i:]


needs_captures = pytest.mark.skipif(not CAPTURES.is_dir(), reason="reference captures not present")


@needs_captures
def test_range_error_block_is_identical_to_the_capture() -> None:
    code, out, err = sim(LLAMA_8B, "--gpu-memory-utilization", "1.5")
    assert code == 1
    assert "non-default args: {" in out and "'gpu_memory_utilization': 1.5" in out
    tail = err.splitlines()[-4:]
    assert tail == capture_tail("fail_b2_gpu_mem_util_1_5.log", "pydantic_core._pydantic_core")
    assert "Traceback (most recent call last):" in err


@needs_captures
def test_max_num_seqs_zero_reports_both_scheduler_errors_like_the_capture() -> None:
    code, _out, err = sim(LLAMA_8B, "--max-num-seqs", "0")
    assert code == 1
    expected = capture_tail("fail_b3_max_num_seqs_0.log", "pydantic_core._pydantic_core")
    assert err.splitlines()[-len(expected) :] == expected


def test_max_model_len_above_the_model_is_a_model_config_error() -> None:
    code, out, err = sim(LLAMA_8B, "--max-model-len", "200000")
    assert code == 1
    assert "Using max model len" not in out  # raised while building ModelConfig
    assert "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig" in err
    assert (
        "  Value error, User-specified max_model_len (200000) is greater than the derived "
        "max_model_len (max_position_embeddings=131072.0 or model_max_length=None in model's "
        "config.json). To allow overriding this maximum, set the env var "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1." in err
    )


@needs_captures
def test_unknown_flag_exits_2_like_argparse() -> None:
    code, out, err = sim(LLAMA_8B, "--no-such-flag", "3")
    assert code == 2 and out == ""
    captured = (CAPTURES / "fail_b4_unknown_flag.log").read_text(encoding="utf-8").splitlines()
    assert (
        err.splitlines()[-1]
        == captured[-1]
        == "vllm: error: unrecognized arguments: --no-such-flag 3"
    )


def test_removed_vllm_flag_is_unrecognized() -> None:
    code, _out, err = sim(LLAMA_8B, "--disable-log-requests", "--sim-vllm-version", "0.32.0")
    assert code == 2
    assert err.splitlines()[-1] == "vllm: error: unrecognized arguments: --disable-log-requests"


def test_bad_choice_is_a_serve_usage_error() -> None:
    code, _out, err = sim(LLAMA_8B, "--kv-cache-dtype", "fp7")
    assert code == 2
    assert err.startswith("usage: vllm serve")
    assert "vllm serve: error: argument --kv-cache-dtype: invalid choice: 'fp7'" in err


def test_unknown_model_is_vllms_invalid_repository_error() -> None:
    code, _out, err = sim("nobody/no-such-model")
    assert code == 1
    assert "1 validation error for ModelConfig" in err
    assert (
        "Value error, Invalid repository ID or local directory specified: 'nobody/no-such-model'."
        in err
    )


def test_unknown_quantization_and_checkpoint_only_methods() -> None:
    code, _out, err = sim(LLAMA_8B, "--quantization", "bogus")
    assert code == 1 and "Value error, Unknown quantization method: bogus. Must be one of [" in err
    code, _out, err = sim(LLAMA_8B, "--quantization", "awq")
    assert code == 1 and "Value error, Cannot find the config file for awq" in err
    code, _out, err = sim("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "-q", "fp8")
    assert code == 1
    assert (
        "Quantization method specified in the model config (awq) does not match the "
        "quantization method specified in the `quantization` argument (fp8)." in err
    )


def test_parallel_layout_errors() -> None:
    code, _out, err = sim(LLAMA_8B, "-tp", "2")
    assert code == 1
    assert "World size (2) is larger than the number of available GPUs (1) in this node." in err
    code, _out, err = sim(LLAMA_8B, "-tp", "3", "--sim-gpus", "4")
    assert code == 1
    assert (
        "Total number of attention heads (32) must be divisible by tensor parallel size (3)." in err
    )


def _site(name: str) -> str:
    """Where the simulator's default vLLM version logs ``name`` (its release record's)."""
    return release_of(DEFAULT_SIM_VLLM_VERSION).site(name).source


def engine_failure(out: str, err: str, exception_line: str) -> None:
    """Assert the EngineCore failure shape: logged traceback, Process block, API RuntimeError."""
    src = re.escape(f"[{_site('core.failed_to_start')}]")  # the default version's line
    assert re.search(
        r"\(EngineCore pid=\d+\) ERROR \d\d-\d\d [\d:]+ " + src + r" EngineCore failed to start\.",
        out,
    )
    assert re.search(src + " " + re.escape(exception_line), out)
    assert "Process EngineCore:" in err
    assert exception_line in err.splitlines()
    assert err.splitlines()[-1] == ENGINE_FAILED


def test_seed_000_story_kv_capacity_error_then_the_fix_starts() -> None:
    code, out, err = sim(
        LLAMA_8B, "--sim-gpu", "rtx3080-10gb", "--quantization", "fp8", "--max-model-len", "30576"
    )
    assert code == 1
    m = re.search(
        r"ValueError: To serve at least one request with the model's max seq len \(30576\), "
        r"\(([\d.]+) GiB KV cache is needed, which is larger than the available KV cache "
        r"memory \(([\d.]+) GiB\)\. Based on the available memory, the estimated maximum "
        r"model length is (\d+)\. ",
        out,
    )
    assert m is not None
    exception_line = next(
        line for line in err.splitlines() if line.startswith("ValueError: To serve")
    )
    engine_failure(out, err, exception_line)
    assert "GPU KV cache size" not in out  # the check fails before the KV report
    assert "Available KV cache memory: " in out


def test_weight_oom_logs_vllms_hint_and_raises_torch_oom() -> None:
    code, out, err = sim(LLAMA_8B, "--sim-gpu", "rtx3080-10gb")
    assert code == 1
    assert re.search(
        r"ERROR .*"
        + re.escape(f"[{_site('runner.load_model.error')}]")
        + r" Failed to load model - not enough GPU memory\. Try "
        r"lowering --gpu-memory-utilization to free memory for weights, increasing "
        r"--tensor-parallel-size, or using --quantization\.",
        out,
    )
    line = next(
        x for x in err.splitlines() if x.startswith("torch.OutOfMemoryError: CUDA out of memory.")
    )
    engine_failure(out, err, line)


def test_free_memory_check() -> None:
    code, out, err = sim(
        LLAMA_8B, "--sim-gpu", "rtx3080-10gb", "--sim-gpu-used-gb", "2", "-q", "fp8"
    )
    assert code == 1
    line = next(
        x for x in err.splitlines() if x.startswith("ValueError: Free memory on device cuda:0 (")
    )
    assert "on startup is less than desired GPU memory utilization (0.92, 8.99 GiB)." in line
    engine_failure(out, err, line)
    assert "Starting to load model" not in out


def test_no_memory_for_cache_blocks() -> None:
    code, out, err = sim(LLAMA_8B, "--sim-gpu", "rtx3080-10gb", "--cpu-offload-gb", "6")
    assert code == 1
    line = next(x for x in err.splitlines() if x.startswith("ValueError: No available memory"))
    assert line == (
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine (this flag also controls CPU "
        "memory reservation on the CPU backend, despite its name). See "
        "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
    )
    engine_failure(out, err, line)


def test_unsupported_block_size_fails_after_the_kv_report() -> None:
    code, out, err = sim(
        LLAMA_8B, "--max-model-len", "4096", "--block-size", "8", "--sim-gpu", "rtx4090-24gb"
    )
    assert code == 1
    assert "GPU KV cache size: " in out
    engine_failure(
        out, err, "ValueError: No common block size for 8 (FLASH_ATTN: [MultipleOf(16)])."
    )


def test_port_in_use_is_errno_98() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        out, err = io.StringIO(), io.StringIO()
        argv = [
            "serve",
            LLAMA_8B,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--sim-speed",
            "2000",
        ]
        code = run(argv, out=out, err=err, install_signals=False)
    assert code == 1
    assert err.getvalue().splitlines()[-1] == "OSError: [Errno 98] Address already in use"


def test_cross_field_scheduler_errors() -> None:
    code, _out, err = sim(LLAMA_8B, "--max-num-batched-tokens", "64", "--max-num-seqs", "128")
    assert code == 1
    assert "1 validation error for SchedulerConfig" in err
    assert (
        "  Value error, max_num_batched_tokens (64) must be greater than or equal to "
        "max_num_seqs (128)." in err
    )
    code, _out, err = sim(
        LLAMA_8B, "--no-enable-chunked-prefill", "--max-num-batched-tokens", "4096"
    )
    assert code == 1
    assert "max_num_batched_tokens (4096) is smaller than max_model_len (131072)." in err


def test_max_model_len_zero_is_rejected_as_vllm_rejects_it() -> None:
    """vLLM 0.32 logs the length, then ModelConfig's validator refuses it (captured)."""
    code, out, err = sim(LLAMA_8B, "--max-model-len", "0")
    assert code == 1
    assert "Using max model len 0" in out
    real = (CAPTURES.parent / "sim" / "captures" / "fail_max_model_len_0.err").read_text()
    real_tail = [line for line in real.splitlines() if not line.startswith("rc=")][-3:]
    ours = err.splitlines()[-3:]
    assert (
        ours[0]
        == "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig"
    )
    assert ours[1].startswith(real_tail[1].split(" [type=")[0])
    assert ours[2] == real_tail[2]


@pytest.mark.parametrize("word", ["gpus", "models", "catalog"])
def test_the_catalogue_takes_no_arguments_and_says_so_in_one_line(word: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert run([word, "--sim-profile-dir", "/nowhere"], out, err, install_signals=False) == 2
    assert out.getvalue() == "" and err.getvalue().count("\n") == 1
    assert f"vtc-sim {word}: takes no arguments" in err.getvalue()
    help_out = io.StringIO()
    assert run([word, "--help"], help_out, io.StringIO(), install_signals=False) == 0
    assert help_out.getvalue().startswith("usage: vtc-sim")
