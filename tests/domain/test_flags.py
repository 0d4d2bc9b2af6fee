"""ServeFlags: declared once, rendered as argv, parsed back, validated as vLLM does."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tui.domain.flags.humanint import parse_human_int, parse_human_int_or_auto
from tui.domain.flags.serve import (
    ArgvError,
    FlagError,
    FlagKind,
    ServeFlags,
    flag_spec,
    flag_specs,
    problems_from_error,
)
from tui.domain.flags.serve_diff import diff_flags
from tui.domain.flags.validation import parse_serve_argv, validate_form

SEED_FLAGS = [
    "gpu_memory_utilization",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "block_size",
    "quantization",
    "kv_cache_dtype",
    "dtype",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "cpu_offload_gb",
    "max_logprobs",
    "enable_prefix_caching",
    "enable_chunked_prefill",
    "enforce_eager",
    "kv_cache_memory_bytes",
]


def test_every_seed_flag_is_declared_with_cli_spelling_and_help() -> None:
    for name in SEED_FLAGS:
        spec = flag_spec(name)
        assert spec.cli == "--" + name.replace("_", "-")
        assert spec.help


def test_vllm_defaults_match_the_reference() -> None:
    assert flag_spec("gpu_memory_utilization").vllm_default == 0.92
    assert flag_spec("max_logprobs").vllm_default == 20
    assert flag_spec("tensor_parallel_size").vllm_default == 1
    assert flag_spec("kv_cache_dtype").vllm_default == "auto"


def test_ranges_come_from_the_declaration() -> None:
    gmu = flag_spec("gpu_memory_utilization")
    assert (gmu.gt, gmu.le) == (0, 1)
    assert flag_spec("max_model_len").ge == -1
    assert flag_spec("max_num_seqs").ge == 1
    assert flag_spec("cpu_offload_gb").ge == 0
    assert flag_spec("kv_cache_dtype").kind is FlagKind.CHOICE
    assert "fp8" in (flag_spec("kv_cache_dtype").choices or ())


def test_argv_renders_model_first_then_set_flags_only() -> None:
    flags = ServeFlags(
        model="m", max_model_len=512, enable_prefix_caching=False, kv_cache_memory_bytes=64 * 2**20
    )
    assert flags.to_argv() == [
        "m",
        "--max-model-len",
        "512",
        "--kv-cache-memory-bytes",
        "64M",
        "--no-enable-prefix-caching",
    ]


def test_argv_round_trips_through_the_parser() -> None:
    flags = ServeFlags(
        model="meta-llama/Llama-3.1-8B-Instruct",
        gpu_memory_utilization=0.9,
        max_model_len=400,
        max_num_seqs=512,
        block_size=32,
        quantization="fp8",
        dtype="float16",
        cpu_offload_gb=1.0,
        enforce_eager=True,
        tensor_parallel_size=2,
        extra_args=("--trust-remote-code",),
    )
    assert parse_serve_argv(["vllm", "serve", *flags.to_argv()]).to_flags() == flags


def test_parser_accepts_vllm_spellings() -> None:
    parsed = parse_serve_argv(
        [
            "serve",
            "m",
            "--max_model_len=32k",
            "-tp",
            "2",
            "--gpu-memory-utilization",
            "0.5",
            "--enable-chunked-prefill",
            "--no-enforce-eager",
            "--kv-cache-memory-bytes",
            "1G",
            "--max-model-len",
            "auto",
        ]
    )
    assert parsed.model == "m"
    assert parsed.values == {
        "max_model_len": -1,
        "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.5,
        "enable_chunked_prefill": True,
        "enforce_eager": False,
        "kv_cache_memory_bytes": 2**30,
    }


def test_unknown_options_pass_through_with_their_values() -> None:
    parsed = parse_serve_argv(["m", "--seed", "3", "--trust-remote-code", "--max-model-len", "8"])
    assert parsed.extra == ("--seed", "3", "--trust-remote-code")
    assert parsed.values == {"max_model_len": 8}


def test_negative_number_is_a_value_not_an_option() -> None:
    assert parse_serve_argv(["m", "--max-model-len", "-1"]).values == {"max_model_len": -1}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["m", "--kv-cache-dtype", "fp7"], "argument --kv-cache-dtype: invalid choice: 'fp7'"),
        (["m", "--max-num-seqs", "many"], "argument --max-num-seqs: invalid int value: 'many'"),
        (["m", "--gpu-memory-utilization", "x"], "invalid float value: 'x'"),
        (["m", "--max-num-seqs"], "expected one argument"),
        (["m", "--kv-cache-memory-bytes", "1.5G"], "Decimals are not allowed"),
    ],
)
def test_argparse_errors_use_vllm_wording(argv: list[str], message: str) -> None:
    with pytest.raises(ArgvError, match=message):
        parse_serve_argv(argv)


def test_human_ints_follow_vllm() -> None:
    assert parse_human_int("20G") == 20 * 2**30
    assert parse_human_int("20g") == 20 * 10**9
    assert parse_human_int("1.5k") == 1500
    assert parse_human_int("4096") == 4096
    assert parse_human_int_or_auto("auto") == -1
    with pytest.raises(ValueError, match=r"Did you mean to use 1\.5k"):
        parse_human_int("1.5K")


@pytest.mark.parametrize(
    ("changes", "field", "text"),
    [
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization", "less than or equal to 1"),
        ({"gpu_memory_utilization": 0}, "gpu_memory_utilization", "greater than 0"),
        ({"max_num_seqs": 0}, "max_num_seqs", "greater than or equal to 1"),
        ({"max_model_len": -2}, "max_model_len", "greater than or equal to -1"),
        ({"cpu_offload_gb": -1}, "cpu_offload_gb", "greater than or equal to 0"),
        ({"tensor_parallel_size": 0}, "tensor_parallel_size", "greater than or equal to 1"),
        ({"block_size": 0}, "block_size", "greater than 0"),
    ],
)
def test_range_violations_read_like_vllm(changes: dict[str, float], field: str, text: str) -> None:
    with pytest.raises(ValidationError) as info:
        ServeFlags(model="m", **changes)  # type: ignore[arg-type]
    problems = problems_from_error(info.value)
    assert problems[0].field == field
    assert text in problems[0].message


def test_cross_field_batched_tokens_below_seqs() -> None:
    with pytest.raises(ValidationError, match=r"max_num_batched_tokens \(256\) must be greater"):
        ServeFlags(model="m", max_num_seqs=512, max_num_batched_tokens=256)


def test_cross_field_batched_tokens_below_len_only_without_chunked_prefill() -> None:
    ServeFlags(model="m", max_model_len=8192, max_num_batched_tokens=2048)  # chunked: fine
    with pytest.raises(ValidationError, match=r"is smaller than max_model_len \(8192\)"):
        ServeFlags(
            model="m", max_model_len=8192, max_num_batched_tokens=2048, enable_chunked_prefill=False
        )


def test_unknown_quantization_is_rejected_with_vllms_text() -> None:
    with pytest.raises(ValidationError, match="Unknown quantization method: squeezellm"):
        ServeFlags(model="m", quantization="squeezellm")
    assert ServeFlags(model="m", quantization="awq").quantization == "awq"


def test_form_validation_collects_every_problem_at_once() -> None:
    flags, problems = validate_form(
        "m", {"max_num_seqs": "lots", "gpu_memory_utilization": "abc", "block_size": ""}
    )
    assert flags is None
    assert {p.field for p in problems} == {"max_num_seqs", "gpu_memory_utilization"}


def test_form_validation_returns_flags_when_valid() -> None:
    flags, problems = validate_form(
        "m", {"max_model_len": "4k", "enforce_eager": "true"}, "--seed 1"
    )
    assert problems == []
    assert flags is not None
    assert flags.max_model_len == 4000
    assert flags.enforce_eager is True
    assert flags.extra_args == ("--seed", "1")


def test_form_reports_range_errors_against_the_field() -> None:
    flags, problems = validate_form("m", {"gpu_memory_utilization": "1.2"})
    assert flags is None
    assert problems[0].field == "gpu_memory_utilization"


def test_diff_compares_effective_values() -> None:
    a = ServeFlags(model="m")
    b = ServeFlags(model="m", gpu_memory_utilization=0.92, max_model_len=400, dtype="auto")
    changes = diff_flags(a, b)
    assert [(c.name, c.old, c.new) for c in changes] == [("max_model_len", None, 400)]


def test_diff_reports_model_and_extra_args() -> None:
    a = ServeFlags(model="a", extra_args=("--seed", "1"))
    b = ServeFlags(model="b")
    assert [c.name for c in diff_flags(a, b)] == ["model", "extra_args"]


def test_flags_are_frozen_and_replace_validates() -> None:
    flags = ServeFlags(model="m", max_model_len=512)
    with pytest.raises(ValidationError):
        flags.max_model_len = 1  # type: ignore[misc]
    assert flags.replace(max_model_len=None).max_model_len is None
    with pytest.raises(FlagError, match=r"^--gpu-memory-utilization 2\.0: Input should be less"):
        flags.replace(gpu_memory_utilization=2.0)


def test_every_declared_flag_renders_and_parses_back() -> None:
    samples = {FlagKind.INT: "64", FlagKind.FLOAT: "0.5", FlagKind.BOOL: "true", FlagKind.STR: "x"}
    for spec in flag_specs():
        text = spec.choices[1] if spec.choices else samples[spec.kind]
        if spec.name == "quantization":
            text = "awq"
        value = spec.parse(text)
        flags = ServeFlags.model_validate({"model": "m", spec.name: value})
        reparsed = parse_serve_argv(flags.to_argv()).to_flags()
        assert getattr(reparsed, spec.name) == value, spec.name


def test_command_line_is_quoted_for_display() -> None:
    flags = ServeFlags(model="my model", extra_args=("--chat-template", "a b"))
    assert flags.command_line() == "vllm serve 'my model' --chat-template 'a b'"
