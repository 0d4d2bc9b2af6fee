"""Command-line parsing: declared flags, the allow-list, ``--sim-*`` options, the tokenizer."""

from __future__ import annotations

import pytest

from tui.domain.flags.serve import ArgvError, ServeFlags
from tui.sim.argv import UnrecognizedArgs, parse_command, split_sim_options
from tui.sim.catalog import GIB
from tui.sim.server import non_default_args
from tui.sim.tokenizer import GEN_WORDS, ApproxTokenizer, count_tokens, tokenize


def test_console_argv_round_trips() -> None:
    flags = ServeFlags(
        model="meta-llama/Llama-3.1-8B-Instruct",
        max_model_len=4096,
        gpu_memory_utilization=0.85,
        enforce_eager=True,
        kv_cache_memory_bytes=2 * GIB,
    )
    cmd = parse_command([*flags.to_argv(), "--sim-gpu", "h100-80gb", "--sim-speed", "10"])
    assert cmd.parsed.to_flags() == flags
    assert cmd.sim.gpu.key == "h100-80gb" and cmd.sim.speed == 10.0


def test_sim_options_both_spellings_and_defaults() -> None:
    cmd = parse_command(["m", "--sim-gpu=rtx3080-10gb", "--sim_gpu_used_gb", "1.5", "--sim-seed=7"])
    assert cmd.sim.gpu.name == "NVIDIA GeForce RTX 3080"
    assert cmd.sim.gpu_used_bytes == int(1.5 * GIB) and cmd.sim.seed == 7
    assert parse_command(["m"]).sim.gpu.key == "rtx3080-10gb"  # as `vtc --demo`
    with pytest.raises(ArgvError, match="unknown simulated GPU 'gtx1'"):
        parse_command(["m", "--sim-gpu", "gtx1"])
    with pytest.raises(ArgvError, match="invalid float value: 'fast'"):
        parse_command(["m", "--sim-speed", "fast"])


def test_allow_listed_vllm_flags_are_accepted() -> None:
    cmd = parse_command(
        [
            "m",
            "--trust-remote-code",
            "--api-key",
            "k1",
            "k2",
            "--uvicorn-log-level",
            "warning",
            "--seed",
            "3",
            "--load-format",
            "dummy",
            "--enable-log-requests",
            "--performance-mode",
            "throughput",
            "--disable-log-stats",
        ]
    )
    front = cmd.frontend
    assert front.api_key == "k1"
    assert not front.access_log and not front.log_stats
    assert front.performance_mode == "throughput"
    assert front.values["trust_remote_code"] is True and front.values["seed"] == 3
    assert (
        parse_command(["m", "--no-trust-remote-code"]).frontend.values["trust_remote_code"] is False
    )


PIN_032 = ("--sim-vllm-version", "0.32.0")  # 0.33 knows --disable-log-requests again


def test_unknown_flags_and_positionals_are_collected() -> None:
    with pytest.raises(UnrecognizedArgs) as info:
        parse_command([*("m", "--swap-space", "4", "extra", "--disable-log-requests"), *PIN_032])
    assert str(info.value) == "unrecognized arguments: --swap-space 4 extra --disable-log-requests"


def test_argparse_prefixes_expand_and_ambiguity_fails() -> None:
    cmd = parse_command(["m", "--kv-cache-memory=1G", "--enforce"])
    assert cmd.parsed.values["kv_cache_memory_bytes"] == GIB
    assert cmd.parsed.values["enforce_eager"] is True
    with pytest.raises(ArgvError, match="ambiguous option: --kv-cache could match"):
        parse_command(["m", "--kv-cache", "x"])


def test_model_flag_and_bool_flag_before_model() -> None:
    assert parse_command(["--model", "org/name"]).parsed.model == "org/name"
    assert parse_command(["--trust-remote-code", "org/name"]).parsed.model == "org/name"


def test_non_default_args_hide_the_api_key() -> None:
    cmd = parse_command(
        ["org/m", "--port", "8011", "--api-key", "secret", "--max-model-len", "512"]
    )
    args = non_default_args(cmd)
    assert list(args)[:2] == ["model_tag", "port"]
    assert args["api_key"] == "***" and args["max_model_len"] == 512 and args["model"] == "org/m"
    assert "secret" not in repr(args)


def test_tokenizer_counts_words_punctuation_and_long_words() -> None:
    assert count_tokens("the cat sat on the mat") == 6
    assert count_tokens("Hello, world!") == 4
    assert tokenize("internationalization") == ["internatio", "nalization"]
    assert count_tokens("") == 0
    tok = ApproxTokenizer()
    for i in range(len(GEN_WORDS)):
        _tid, text = tok.generated_token(i)
        assert count_tokens(text) == 1
    ids = tok.encode(" alpha beta")
    assert tok.decode(ids) == " alpha beta"


def test_the_model_runner_follows_the_version_and_the_servers_environment() -> None:
    # issue 19: VLLM_USE_V2_MODEL_RUNNER as vLLM's envs.py reads it (bool(int(value)))
    def runner_v2(version: str, environ: dict[str, str]) -> bool:
        sim, _ = split_sim_options(["m", "--sim-vllm-version", version], environ)
        return sim.runner_v2

    # unset: V2 on a GPU with Triton in both (config/vllm.py use_v2_model_runner)
    assert runner_v2("0.33.0", {}) and runner_v2("0.32.0", {})
    assert not runner_v2("0.33.0", {"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert not runner_v2("0.32.0", {"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert runner_v2("0.32.0", {"VLLM_USE_V2_MODEL_RUNNER": "1"})
    with pytest.raises(ArgvError, match="invalid literal for int"):
        runner_v2("0.33.0", {"VLLM_USE_V2_MODEL_RUNNER": "yes"})
    sim, _ = split_sim_options(["m", "--sim-host", "wsl2"], {})
    assert sim.host == "wsl2"
    with pytest.raises(ArgvError, match="--sim-host: invalid choice: 'win'"):
        split_sim_options(["m", "--sim-host", "win"], {})
