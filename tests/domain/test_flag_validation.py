"""The one validation path: every source of flag values, vLLM 0.32's rules, one line each.

The texts asserted here are vLLM's (its argparse, its pydantic configs, its validators as
the CPU build printed them when fed the same values; reference 1.3-1.5).
"""

from __future__ import annotations

import pytest

from tui.domain.errors import VtcError
from tui.domain.flags.problems import FlagError
from tui.domain.flags.serve import ServeFlags
from tui.domain.flags.validation import (
    ModelFacts,
    ValidationContext,
    apply_changes,
    ensure_valid,
    flags_from_argv,
    flags_from_form,
    flags_from_values,
    serve_command,
    validate_form,
)
from tui.domain.preflight import DeviceMemory

CPU = ValidationContext(device=DeviceMemory(64 * 2**30, kind="cpu"))
TINY = ValidationContext(model=ModelFacts(attention_heads=4, checkpoint_quantization=None))


def _refused(argv: list[str], context: ValidationContext | None = None) -> str:
    with pytest.raises(FlagError) as err:
        flags_from_argv(["m", *argv], context)
    line = str(err.value)
    assert "\n" not in line and isinstance(err.value, VtcError)
    return line


# -- the failures the hardening issue found --------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["--enforce-eager=maybe"],
            "argument --enforce-eager/--no-enforce-eager: ignored explicit argument 'maybe'",
        ),
        (["--enforce-eager=yes"], "ignored explicit argument 'yes'"),
        (["--enable-prefix-caching=1"], "ignored explicit argument '1'"),
        (["--no-enforce-eager=on"], "ignored explicit argument 'on'"),
        (
            ["--max-model-len", "0"],
            "--max-model-len 0: max_model_len must be a positive integer, got int: 0. "
            "Example: max_model_len=2048",
        ),
        (["--max-model-len", "9" * 400 + "k"], "(too large)"),
        (["--max-num-batched-tokens", "9" * 400 + "k"], "(too large)"),
        (["--max-num-seqs", "9" * 30], "--max-num-seqs 9999"),
        (["--cpu-offload-gb", "inf"], "--cpu-offload-gb inf: Input should be a finite number"),
        (["--cpu-offload-gb", "1e300"], "Input should be less than or equal to 8589934592"),
        (["--gpu-memory-utilization", "nan"], "--gpu-memory-utilization nan: Input should be"),
        (["--host", ""], "argument --host: an empty value ''"),
        (["--host", "  "], "argument --host: an empty value '"),
        (["--served-model-name", ""], "argument --served-model-name: an empty value"),
        (["--served-model-name", "None"], "'None' is no name"),
        (
            ["--max-model-len", "2240", "--max-model-len", "1024"],
            "--max-model-len: given twice ('--max-model-len 2240', then '--max-model-len 1024')",
        ),
        (["--max-model-len", "2240", "--max_model_len=1024"], "given twice"),
        (["--enforce-eager", "--no-enforce-eager"], "given twice"),
    ],
)
def test_what_the_issue_found_is_refused_in_one_line(argv: list[str], line: str) -> None:
    assert line in _refused(argv)


def test_a_flag_in_extra_args_that_the_form_sets_is_refused_not_doubled() -> None:
    flags, problems = validate_form("m", {"max_model_len": "2240"}, "--max-model-len 1024")
    assert flags is None
    (problem,) = problems
    assert problem.field == "extra_args"
    assert problem.line == (
        "--max-model-len 1024 in extra args, but max_model_len is also set (2240); vLLM would "
        "use the last one while vtc shows the other: keep one"
    )


def test_a_flag_in_extra_args_that_the_form_leaves_unset_moves_into_the_form() -> None:
    flags = flags_from_form("m", {"max_model_len": ""}, "--max-model 1024 --seed 3")
    assert flags.max_model_len == 1024 and flags.extra_args == ("--seed", "3")
    assert flags.to_argv() == ["m", "--max-model-len", "1024", "--seed", "3"]
    # and is checked like the field: 0 is refused in vLLM's words there too
    _, problems = validate_form("m", {}, "--max-num-seqs 0")
    assert "Input should be greater than or equal to 1" in problems[0].line


# -- booleans accept what vLLM accepts ----------------------------------------------------------
def test_booleans_on_the_command_line_are_switches_only() -> None:
    flags = flags_from_argv(["m", "--enforce-eager", "--no-enable-prefix-caching"])
    assert (flags.enforce_eager, flags.enable_prefix_caching) == (True, False)


@pytest.mark.parametrize("text", ["yes", "1", "no", "0", "maybe", "enabled"])
def test_booleans_in_the_form_are_on_or_off(text: str) -> None:
    _, problems = validate_form("m", {"enforce_eager": text})
    assert problems and problems[0].field == "enforce_eager"


def test_booleans_in_files_are_true_or_false() -> None:
    with pytest.raises(FlagError, match="expected true or false, got a number"):
        flags_from_values({"model": "m", "enforce_eager": 1})
    with pytest.raises(FlagError, match="expected an integer, got a boolean"):
        flags_from_values({"model": "m", "max_num_seqs": True})
    flags = flags_from_values({"model": "m", "kv_cache_memory_bytes": "64M", "cpu_offload_gb": 1})
    assert flags.kv_cache_memory_bytes == 64 * 2**20 and flags.cpu_offload_gb == 1.0


# -- vLLM's parser for everything else ----------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--no-such-flag", "3"], "unrecognized arguments: --no-such-flag 3"),
        (["--max-num", "5"], "ambiguous option: --max-num could match --max-num-batched-tokens"),
        (["--seed", "x"], "argument --seed: invalid int value: 'x'"),
        (["--performance-mode", "fast"], "argument --performance-mode: invalid choice: 'fast'"),
        (["--disable-log-stats=yes"], "argument --disable-log-stats: ignored explicit argument"),
        (["--kv-offloading-size"], "argument --kv-offloading-size: expected one argument"),
        (["--enable-auto-tool-choice"], "--enable-auto-tool-choice requires --tool-call-parser"),
        (["--seed", "1", "--seed", "2"], "--seed given twice"),
        (["--model", "other"], "--model in extra args: the model is the form's model field"),
        (["--config", "x.yaml"], "vtc --config FILE"),
        (["-h"], "vLLM would print its help and exit"),
        (["--quantization", "fbgemm_fp8"], "To bypass, set `--allow-deprecated-quantization`."),
        (
            ["--stream-interval", "0"],
            "--stream-interval 0: Input should be greater than or equal to 1 (SchedulerConfig)",
        ),
        (["--kv-cache-metrics-sample", "nan"], "Input should be greater than 0"),
        (["--shutdown-timeout", "-1"], "greater than or equal to 0 (VllmConfig)"),
    ],
)
def test_extra_arguments_are_read_as_vllms_parser_reads_them(argv: list[str], line: str) -> None:
    assert line in _refused(argv)


def test_what_vllm_accepts_passes() -> None:
    flags = flags_from_argv(
        [
            "vllm",
            "serve",
            "m",
            "-tp",
            "2",
            "-qFP8",
            "--max_model_len=32k",
            "--seed",
            "7",
            "--kv-cache-memory",
            "1G",
            "-O3",
            "-cc.mode",
            "3",
            "--served-model-name",
            "svc",
            "--quantization-config",
            "None",
            "--performance-mode",
            "throughput",
        ]
    )
    assert flags.tensor_parallel_size == 2 and flags.quantization == "fp8"
    assert flags.max_model_len == 32000 and flags.kv_cache_memory_bytes == 2**30
    assert flags.extra_args == (
        "--seed",
        "7",
        "-O3",
        "-cc.mode",
        "3",
        "--quantization-config",
        "None",
        "--performance-mode",
        "throughput",
    )


# -- what the caller knows: device and model ----------------------------------------------------
def test_an_explicit_max_num_seqs_above_the_derived_token_budget_is_refused() -> None:
    line = _refused(["--max-num-seqs", "3000"], CPU)
    assert "max_num_batched_tokens (2048) must be greater than or equal to max_num_seqs (3000)" in (
        line
    )
    assert flags_from_argv(["m", "--max-num-seqs", "3000", "-tp", "2"], CPU).max_num_seqs == 3000
    assert flags_from_argv(["m", "--max-num-seqs", "3000"]).max_num_seqs == 3000  # no device
    throughput = ["--max-num-seqs", "3000", "--performance-mode", "throughput"]
    assert flags_from_argv(["m", *throughput], CPU).max_num_seqs == 3000


def test_model_facts_refuse_what_the_checkpoint_cannot_do() -> None:
    assert "Total number of attention heads (4) must be divisible by tensor parallel size (3)" in (
        _refused(["-tp", "3"], TINY)
    )
    assert "Cannot find the config file for awq" in _refused(["-q", "awq"], TINY)
    assert flags_from_argv(["m", "-q", "fp8"], TINY).quantization == "fp8"


# -- the other sources ----------------------------------------------------------------------------
def test_the_serve_command_takes_its_secret_out_before_anything_sees_it() -> None:
    command = serve_command(["m", "--api-key", "sk-1", "--max-model-len", "512"])
    assert command.env == {"VLLM_API_KEY": "sk-1"}
    assert command.flags.to_argv() == ["m", "--max-model-len", "512"]
    with pytest.raises(FlagError, match="VLLM_API_KEY"):
        flags_from_argv(["m", "--api-key", "sk-1"])  # never silently kept


def test_fixes_and_sweeps_go_through_the_same_checks() -> None:
    base = ServeFlags(model="m", max_num_seqs=8)
    assert apply_changes(base, {"max_num_seqs": None, "max_model_len": 512}).max_model_len == 512
    with pytest.raises(FlagError, match=r"^--max-model-len 0: max_model_len must be"):
        apply_changes(base, {"max_model_len": 0})
    with pytest.raises(FlagError, match="unrecognized arguments: --bogus"):
        apply_changes(base, {"extra_args": ("--bogus",)})
    with pytest.raises(FlagError, match="max_num_batched_tokens \\(2048\\)"):
        apply_changes(base, {"max_num_seqs": 4096}, CPU)


def test_no_model_is_vllms_own_words() -> None:
    with pytest.raises(FlagError, match="No model specified!"):
        flags_from_argv(["--max-model-len", "5"])


def test_the_launch_gate_reads_an_existing_record() -> None:
    old = ServeFlags.model_construct(model="m", extra_args=("--no-such-flag",))
    with pytest.raises(FlagError, match="unrecognized arguments: --no-such-flag"):
        ensure_valid(old)
