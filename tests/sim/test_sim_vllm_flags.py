"""The simulator accepts every flag of vLLM 0.32's ``vllm serve`` and rejects what it rejects.

The reference is the captured ``vllm serve --help=all`` of the real CPU build
(``tests/domain/vllm_serve_help_0.32.0.txt``) and argparse's own messages (Python 3.11, as
vLLM 0.32 runs). A property test feeds generated command lines through the parser and the
config checks: nothing but the parser's own error may escape.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_profiles import examples

from tui.domain.flags.serve import ArgvError
from tui.domain.flags.vllm_cli import CliFlag
from tui.domain.flags.vllm_tables import table_for
from tui.sim.argv import UnrecognizedArgs, non_default_args, parse_command
from tui.sim.build import build_engine, build_tokenizer
from tui.sim.cli import run
from tui.sim.logs import VllmLog
from tui.sim.startup import check_command
from tui.sim.vllm_flags import serve_cli

MODEL = "meta-llama/Llama-3.2-1B-Instruct"
V032 = ("--sim-vllm-version", "0.32.0")  # the texts pinned from 0.32's parser


def test_the_flag_table_is_the_domains_one() -> None:
    # Declared once: the console's checks and the simulator read the same parser table
    # (the real-vLLM suite checks that table against the installed vLLM 0.32).
    assert serve_cli() == table_for(None).cli
    assert len(serve_cli().flags) >= 300


def _sample_value(flag: CliFlag) -> list[str]:
    """A value argparse accepts for ``flag`` (none for switches)."""
    if flag.is_boolean:
        return []
    if flag.choices:
        choice = next(c for c in flag.choices if c is not None)
        return [str(choice)]
    if flag.dest == "kv_cache_dtype":
        return ["fp8"]  # free text from 0.33 (platforms register dtypes); vtc checks its own
    kind = flag.type_name or "str"
    if kind.startswith("json"):
        return ["{}"]
    if kind in ("int", "human_readable_int", "human_readable_int_or_auto"):
        return ["2"]
    if kind == "float":
        return ["0.5"]
    return ["x=y"] if flag.dest == "lora_modules" else ["abc"]


SKIP = {"help", "config", "model"}  # --help exits, --config reads a file, --model is the model


@pytest.mark.parametrize(
    "flag", [f for f in serve_cli().flags if f.dest not in SKIP], ids=lambda f: f.name
)
def test_every_vllm_flag_is_accepted(flag: CliFlag) -> None:
    for option in flag.option_strings:
        argv = [MODEL, option, *([] if option.startswith("--no-") else _sample_value(flag))]
        command = parse_command(argv)
        assert command.parsed.model == MODEL


def test_unmodelled_flags_are_kept_and_listed_in_non_default_args() -> None:
    command = parse_command([MODEL, "--enable-mfu-metrics", "--max-log-len", "20", "-O3"])
    front = command.frontend
    assert front.mfu_metrics and front.values["max_log_len"] == 20
    args = non_default_args(command)
    assert args["enable_mfu_metrics"] is True and args["max_log_len"] == 20
    assert next(iter(args)) == "model_tag"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--enable-mfu-metrics=yes"],
            "argument --enable-mfu-metrics/--no-enable-mfu-metrics: ignored explicit argument "
            "'yes'",
        ),
        (["--headless=1"], "argument --headless: ignored explicit argument '1'"),
        (
            ["--max-lora-rank", "7"],
            "argument --max-lora-rank: invalid choice: 7 (choose from 1, 8, 16, 32, 64, 128, "
            "256, 320, 512)",
        ),
        (["--max-loras", "x"], "argument --max-loras: invalid int value: 'x'"),
        (["--max-loras"], "argument --max-loras: expected one argument"),
        (["--lora-modules"], "argument --lora-modules: expected at least one argument"),
        (
            ["--max-model-len", "9" * 400 + ".5k"],
            "argument --max-model-len: invalid human_readable_int_or_auto value",
        ),
    ],
)
def test_argparse_errors_in_argparse_words(argv: list[str], message: str) -> None:
    with pytest.raises(ArgvError) as info:
        parse_command([MODEL, *argv, "--sim-vllm-version", "0.32.0"])
    assert str(info.value).startswith(message)


def test_removed_flags_stay_unrecognized() -> None:
    with pytest.raises(UnrecognizedArgs) as info:
        parse_command([MODEL, "--swap-space", "4", "--disable-log-requests", *V032])
    assert str(info.value) == "unrecognized arguments: --swap-space 4 --disable-log-requests"


def test_each_simulated_version_speaks_its_own_parser() -> None:
    # 0.33 added --watchdog-config and brought --disable-log-requests back as the negative
    # of --enable-log-requests (EnableDisableAction); 0.32 knows neither.
    newer = parse_command([MODEL, "--watchdog-config", "{}", "--disable-log-requests"])
    assert newer.sim.vllm_version == "0.33.0"
    assert newer.frontend.log_requests is False
    with pytest.raises(UnrecognizedArgs):
        parse_command([MODEL, "--watchdog-config", "{}", *V032])
    older = parse_command([MODEL, "--sim-vllm-version", "0.32"])
    assert older.sim.vllm_version == "0.32.0"
    with pytest.raises(ArgvError, match=r"--sim-vllm-version: invalid choice: '0.31.0'"):
        parse_command([MODEL, "--sim-vllm-version", "0.31.0"])


def test_config_yaml_is_expanded_after_the_model_and_the_command_line_wins(
    tmp_path: Path,
) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("max-model-len: 2048\nenable-log-requests: true\nmax_num_seqs: 8\n")
    command = parse_command([MODEL, "--config", str(config), "--max-num-seqs", "4"])
    assert command.parsed.values["max_model_len"] == 2048
    assert command.parsed.values["max_num_seqs"] == 4
    assert command.frontend.log_requests
    with pytest.raises(ArgvError, match=r"Config file must be of a yaml/yml type\. txt supplied"):
        parse_command([MODEL, "--config", str(tmp_path / "x.txt")])


def test_lora_modules_both_formats() -> None:
    lora = parse_command(
        [
            MODEL,
            "--enable-lora",
            "--max-loras",
            "2",
            "--lora-modules",
            "a=/x/a",
            '{"name": "b", "path": "/x/b", "base_model_name": "m"}',
        ]
    ).frontend.lora
    assert lora.enabled and lora.max_loras == 2
    assert [(m.name, m.path, m.base_model_name) for m in lora.modules] == [
        ("a", "/x/a", None),
        ("b", "/x/b", "m"),
    ]
    with pytest.raises(ArgvError, match="Invalid JSON format for --lora-modules"):
        parse_command([MODEL, "--lora-modules", "{nope"])


# -- fuzzing ------------------------------------------------------------------------------------
_OPTIONS = sorted(o for o in serve_cli().option_strings if o not in ("-h", "--help", "--config"))
_VALUES = st.one_of(
    st.sampled_from(["0", "1", "-1", "2", "0.5", "1e9", "inf", "nan", "auto", "1G", "64k", ""]),
    st.sampled_from(["True", "yes", "fp8", "{}", "[1]", "a=b", "--", "-", "x" * 300]),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.text(min_size=0, max_size=12),
)
_TOKEN = st.one_of(
    st.sampled_from(_OPTIONS),
    st.sampled_from(_OPTIONS).map(lambda o: o.replace("-", "_", 3)),
    st.tuples(st.sampled_from(_OPTIONS), _VALUES).map(lambda t: f"{t[0]}={t[1]}"),
    _VALUES,
    st.sampled_from(["--sim-gpu", "--sim-speed", "--sim-gpus", "--sim-gpu-used-gb"]),
)
# Tuning flags with plausible and edge values, so the config checks see many cases.
_TUNING = st.tuples(
    st.sampled_from(
        [
            "--max-model-len",
            "--max-num-seqs",
            "--max-num-batched-tokens",
            "--gpu-memory-utilization",
            "--block-size",
            "--num-gpu-blocks-override",
            "--kv-cache-memory-bytes",
            "--tensor-parallel-size",
            "--cpu-offload-gb",
            "--max-loras",
            "--max-cpu-loras",
            "--max-lora-rank",
            "--sim-gpu-used-gb",
            "--sim-gpu",
            "--kv-cache-dtype",
            "--quantization",
            "--dtype",
        ]
    ),
    st.sampled_from(
        [
            "0",
            "1",
            "-1",
            "2",
            "16",
            "64",
            "1000",
            "4096",
            "131072",
            "0.5",
            "0.98",
            "1.5",
            "1G",
            "64M",
            "fp8",
            "awq",
            "auto",
            "h100-80gb",
            "rtx3080-10gb",
            "float32",
        ]
    ),
).map(list)
_ARGV = st.lists(
    st.one_of(_TOKEN.map(lambda t: [t]), _TUNING, st.just(["--enable-lora"])), max_size=8
).map(lambda parts: [t for part in parts for t in part])


@settings(
    max_examples=int(os.environ.get("VTC_FUZZ_EXAMPLES", examples(400))),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    model=st.sampled_from([MODEL, "Qwen/Qwen2.5-0.5B-Instruct", "no/such-model", "", "~nobody/x"]),
    tokens=_ARGV,
)
def test_no_exception_escapes_the_parser_or_the_config_checks(
    model: str, tokens: list[str]
) -> None:
    _parse_check_build(model, tokens)


def _parse_check_build(model: str, tokens: list[str]) -> None:
    """Parse, check and (for a config that starts) build the engine: only ArgvError escapes."""
    try:
        command = parse_command([model, *tokens])
    except ArgvError:
        return  # argparse's own one-line error (exit 2)
    checked = check_command(command)
    assert (checked.error is None) == (checked.plan is not None)
    plan, cfg = checked.plan, checked.cfg
    if plan is not None and cfg is not None and plan.failure is None:
        tokenizer, _note = build_tokenizer(command, cfg, checked.folder)
        engine = build_engine(command, cfg, plan, tokenizer, VllmLog(io.StringIO()))
        assert engine.scheduler.config.num_gpu_blocks > 0


@settings(
    max_examples=int(os.environ.get("VTC_FUZZ_EXAMPLES", examples(300))),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    model=st.sampled_from(
        [MODEL, "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct-AWQ"]
    ),
    pieces=st.lists(_TUNING, max_size=6),
)
def test_tuning_values_end_in_a_config_error_a_start_failure_or_an_engine(
    model: str, pieces: list[list[str]]
) -> None:
    _parse_check_build(model, [t for piece in pieces for t in piece])


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tokens=st.lists(_TOKEN, max_size=6))
def test_the_cli_never_prints_a_python_traceback_for_bad_argv(tokens: list[str]) -> None:
    """A bad command line ends in vLLM's error shape, never an uncaught exception.

    Valid command lines would start a server; the port is made unbindable (port 1 is
    privileged or taken) only when the parser accepted everything, so nothing serves.
    """
    out, err = io.StringIO(), io.StringIO()
    argv = ["serve", MODEL, *tokens, "--sim-speed", "1000", "--port", "1", "--host", "256.0.0.1"]
    code = run(argv, out=out, err=err, install_signals=False)
    assert code in (1, 2)
    text = err.getvalue()
    if code == 2:  # argparse: the usage, then one "error:" line
        assert text.startswith("usage: vllm") and ": error: " in text
        assert "Traceback" not in text
    else:  # vLLM's own traceback shape, ending in the exception it raises
        assert text.startswith("Traceback (most recent call last):")
        assert re.search(r"^[\w.]+(Error|error): ", text, re.M)
