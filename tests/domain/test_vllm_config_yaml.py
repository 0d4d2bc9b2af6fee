"""vLLM ``--config`` YAML: import into ServeFlags, export back, and vLLM's own expansion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tui.domain.flags.config_yaml import (
    ConfigYamlError,
    export_config_yaml,
    import_config_yaml,
    load_config_mapping,
    vllm_config_args,
)
from tui.domain.flags.serve import ServeFlags
from tui.domain.flags.vllm_cli import VllmCli

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def cli() -> VllmCli:
    return VllmCli.from_json(json.loads((HERE / "vllm_cli_fixture.json").read_text()))


# -- vLLM's literal expansion ------------------------------------------------------------------
def test_vllm_config_args_matches_what_vllm_0_32_expanded() -> None:
    # Ground truth: this file went through vLLM 0.32.0's own FlexibleArgumentParser.
    # load_config_file under `vllm serve` (top-level parser); its output is the list below.
    # Note `enable-prefix-caching: false` vanishes: the --no- lookup runs on the top-level
    # parser, which has no such option.
    text = """\
enable-prefix-caching: false
enforce_eager: true
max_model_len: 2k
no-enable-chunked-prefill: true
served-model-name: [a, b]
compilation-config:
  mode: 0
  cudagraph_capture_sizes: [1, 2]
gpu-memory-utilization: 0.5
kv_cache_memory_bytes: null
"""
    assert vllm_config_args(load_config_mapping(text)) == [
        "--enforce_eager",
        "--max_model_len",
        "2k",
        "--no-enable-chunked-prefill",
        "--served-model-name",
        "a",
        "b",
        "--compilation-config",
        '{"mode": 0, "cudagraph_capture_sizes": [1, 2]}',
        "--gpu-memory-utilization",
        "0.5",
        "--kv_cache_memory_bytes",
        "None",
    ]


def test_vllm_config_args_drops_empty_lists() -> None:
    assert vllm_config_args({"allowed-origins": [], "port": 8001}) == ["--port", "8001"]


# -- import ------------------------------------------------------------------------------------
def test_import_maps_declared_flags_by_either_spelling() -> None:
    text = """\
model: facebook/opt-125m
gpu_memory_utilization: 0.85
max-model-len: 4k
kv-cache-memory-bytes: 64M
tensor_parallel_size: 2
kv-cache-dtype: fp8
enforce-eager: true
"""
    result = import_config_yaml(text)
    flags = result.flags
    assert flags.model == "facebook/opt-125m"
    assert flags.max_model_len == 4000  # vLLM: lower-case k is decimal
    assert flags.kv_cache_memory_bytes == 64 * 2**20
    assert flags.tensor_parallel_size == 2
    assert flags.kv_cache_dtype == "fp8"
    assert flags.enforce_eager is True
    assert flags.gpu_memory_utilization == 0.85
    assert flags.extra_args == ()


def test_a_flag_given_twice_by_its_alias_is_refused_not_silently_the_last() -> None:
    # vLLM would take the later one with only a warning; vtc names both keys
    text = "model: m\ngpu_memory_utilization: 0.85\ndevice-memory-utilization: 0.8\n"
    with pytest.raises(
        ConfigYamlError, match="device-memory-utilization: also given as 'gpu_memory_utilization'"
    ):
        import_config_yaml(text)


def test_import_renders_other_keys_exactly_as_vllm_expands_them() -> None:
    text = """\
model: m
disable-log-stats: true
allowed-origins: '["http://a", "http://b"]'
compilation-config: {mode: 3, cudagraph_capture_sizes: [1, 2]}
long_prefill_token_threshold: 2
chat-template: null
lora-modules: []
"""
    flags = import_config_yaml(text).flags
    assert flags.extra_args == (
        "--disable-log-stats",
        "--allowed-origins",
        '["http://a", "http://b"]',
        "--compilation-config",
        '{"mode": 3, "cudagraph_capture_sizes": [1, 2]}',
        "--long_prefill_token_threshold",
        "2",
        "--chat-template",
        "None",
    )
    assert flags.to_argv()[0] == "m"


def test_other_keys_are_checked_against_vllms_parser() -> None:
    # a YAML list for a one-value JSON option expands to two arguments, which vLLM refuses;
    # an unknown key is an unrecognized argument
    text = 'model: m\nallowed-origins: ["http://a", "http://b"]\nno-such-key: 1\n'
    with pytest.raises(ConfigYamlError) as err:
        import_config_yaml(text)
    message = str(err.value)
    assert "unrecognized arguments: http://b --no-such-key 1" in message
    assert "argument --allowed-origins: invalid json value: 'http://a'" in message


def test_false_keeps_the_operators_intent_with_a_note(cli: VllmCli) -> None:
    text = "model: m\nenable-prefix-caching: false\nenable-log-requests: false\n"
    without_cli = import_config_yaml(text)
    assert without_cli.flags.enable_prefix_caching is False
    assert "--no-enable-prefix-caching" in without_cli.flags.to_argv()
    # an undeclared flag: vLLM 0.32's shipped parser knows its --no- form
    assert without_cli.flags.extra_args == ("--no-enable-log-requests",)
    assert any("silently ignored" in n for n in without_cli.notes)
    with_cli = import_config_yaml(text, cli=cli)
    assert with_cli.flags.extra_args == ("--no-enable-log-requests",)


def test_false_for_a_store_true_flag_is_dropped(cli: VllmCli) -> None:
    result = import_config_yaml("model: m\ndisable-log-stats: false\n", cli=cli)
    assert result.flags.extra_args == ()
    assert any("disable-log-stats" in n and "dropped" in n for n in result.notes)


def test_no_key_true_sets_a_declared_boolean_off() -> None:
    flags = import_config_yaml("model: m\nno-enable-chunked-prefill: true\n").flags
    assert flags.enable_chunked_prefill is False
    assert flags.extra_args == ()


def test_installed_flags_resolve_prefix_keys_to_declared_flags(cli: VllmCli) -> None:
    flags = import_config_yaml("model: m\nmax-model: 1024\nno-enable-prefix: true\n", cli=cli).flags
    assert flags.max_model_len == 1024
    assert flags.enable_prefix_caching is False
    # without an introspected list, vLLM 0.32's shipped parser resolves it the same way
    plain = import_config_yaml("model: m\nmax-model: 1024\n").flags
    assert plain.max_model_len == 1024 and plain.extra_args == ()


def test_served_model_name_lists() -> None:
    one = import_config_yaml("model: m\nserved-model-name: [alias]\n").flags
    assert one.served_model_name == "alias"
    with pytest.raises(ConfigYamlError, match=r"vtc serves one name; got 2 \(a, b\)"):
        import_config_yaml("model: m\nserved-model-name: [a, b]\n")


def test_the_command_line_model_beats_the_file() -> None:
    text = "model: from-file\nport: 8001\n"
    assert import_config_yaml(text, model="from-cli").flags.model == "from-cli"
    assert import_config_yaml(text).flags.model == "from-file"
    with pytest.raises(ConfigYamlError, match="No model specified!"):
        import_config_yaml("port: 8001\n")


def test_secrets_go_to_the_environment_not_argv() -> None:
    result = import_config_yaml("model: m\napi-key: sk-secret-123\nhf_token: [hf_abc, hf_def]\n")
    assert result.secret_env == {"VLLM_API_KEY": "sk-secret-123", "HF_TOKEN": "hf_abc"}
    argv = result.flags.to_argv()
    assert not any("secret" in a or "hf_" in a for a in argv)
    assert any("VLLM_API_KEY" in n for n in result.notes)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("- a\n- b\n", "must be a mapping of flag: value, got a list"),
        ("just text\n", "got a string"),
        ("", "empty"),
        ("model: [unclosed\n", "not valid YAML"),
        ("1: 2\nmodel: m\n", "key 1: flag names must be text"),
        ("model: m\n--port: 8001\n", "without leading dashes"),
        ("model: m\nenforce-eager: yes please\n", "enforce-eager: expected true or false"),
        ("model: m\nmax-model-len: [1, 2]\n", "max-model-len: expected a single value, got a list"),
        ("model: m\nport: {a: 1}\n", "port: expected a single value, got a mapping"),
        ("model: m\nport: true\n", "port: expected a value, got true"),
        ("model: m\nmax_num_seqs: lots\n", "max_num_seqs: invalid int value: 'lots'"),
        ("model: m\nkv-cache-dtype: fp9\n", "kv-cache-dtype: invalid choice: 'fp9'"),
        ("model: m\ngpu-memory-utilization: 1.5\n", "gpu-memory-utilization 1.5: Input should be"),
        ("model: {a: 1}\n", "model: expected a model name or path"),
        ("model: m\napi-key: {a: 1}\n", "api-key: expected text"),
    ],
)
def test_bad_files_name_the_key(text: str, fragment: str) -> None:
    with pytest.raises(ConfigYamlError, match=fragment.replace("[", r"\[")):
        import_config_yaml(text)


def test_cross_field_errors_name_the_key_as_written() -> None:
    text = "model: m\nmax_num_batched_tokens: 8\nmax-num-seqs: 16\n"
    with pytest.raises(ConfigYamlError) as err:
        import_config_yaml(text)
    key, _, message = str(err.value).partition(": ")
    assert key in ("max_num_batched_tokens", "max-num-seqs")  # spelled as in the file
    assert message == (
        "max_num_batched_tokens (8) must be greater than or equal to max_num_seqs (16)."
    )


# -- export ------------------------------------------------------------------------------------
def test_export_writes_set_flags_and_parses_extra_args_back_to_keys() -> None:
    flags = ServeFlags(
        model="m",
        gpu_memory_utilization=0.9,
        kv_cache_memory_bytes=64 * 2**20,
        enable_prefix_caching=False,
        enforce_eager=True,
        extra_args=(
            "--disable-log-stats",
            "--compilation-config",
            '{"mode": 3}',
            "--allowed-origins",
            '["a", "b"]',
            "--long-prefill-token-threshold=2",
            "--tokenizer",
            "007",  # not typed: int("007") would print as 7
        ),
    )
    export = export_config_yaml(flags)
    assert export.left_out == () and export.notes == ()
    doc = yaml.safe_load(export.text)
    assert doc == {
        "model": "m",
        "gpu-memory-utilization": 0.9,
        "kv-cache-memory-bytes": "64M",
        "no-enable-prefix-caching": True,  # `key: false` would be ignored by vLLM
        "enforce-eager": True,
        "disable-log-stats": True,
        "compilation-config": {"mode": 3},
        "allowed-origins": '["a", "b"]',
        "long-prefill-token-threshold": 2,
        "tokenizer": "007",
    }
    assert next(iter(doc)) == "model"


def test_export_leaves_out_what_a_key_cannot_hold(cli: VllmCli) -> None:
    # ServeFlags refuses all of these now; a run recorded by an older vtc can hold them
    flags = ServeFlags.model_construct(
        model="m",
        max_model_len=1024,
        extra_args=("-Zq", "2", "--api-key", "sk-secret-123", "--foo=-x", "--max-model-len", "9"),
    )
    export = export_config_yaml(flags)
    assert "sk-secret-123" not in export.text
    assert "sk-secret-123" not in " ".join(export.left_out + export.notes)
    assert export.left_out == ("-Zq", "2", "--api-key", "--foo", "-x", "--max-model-len", "9")
    assert len(export.notes) == 4
    # short options become their long key (vLLM 0.32's parser, or the installed one)
    tp = ServeFlags.model_construct(model="m", extra_args=("-tp", "2"))
    assert yaml.safe_load(export_config_yaml(tp, cli=cli).text)["tensor-parallel-size"] == 2
    o3 = export_config_yaml(ServeFlags(model="m", extra_args=("-O3", "-cc.mode", "0")), cli=cli)
    assert yaml.safe_load(o3.text) == {
        "model": "m",
        "optimization-level": 3,
        "compilation-config.mode": 0,
    }


# -- round trips -----------------------------------------------------------------------------------
ROUND_TRIP_FLAGS = [
    ServeFlags(model="m"),
    ServeFlags(
        model="org/model-7b",
        gpu_memory_utilization=0.85,
        max_model_len=-1,
        block_size=32,
        kv_cache_dtype="fp8",
        kv_cache_memory_bytes=3 * 2**30,
        num_gpu_blocks_override=100,
        cpu_offload_gb=1.5,
        enable_prefix_caching=False,
        enable_chunked_prefill=True,
        max_num_seqs=64,
        max_num_batched_tokens=8192,
        max_logprobs=-1,
        dtype="bfloat16",
        quantization="awq",
        enforce_eager=False,
        tensor_parallel_size=2,
        pipeline_parallel_size=1,
        port=8123,
        host="127.0.0.1",
        served_model_name="svc",
    ),
    ServeFlags(
        model="m",
        max_model_len=12345,
        extra_args=(
            "--disable-log-stats",
            "--compilation-config",
            '{"mode": 3, "cudagraph_capture_sizes": [1, 2]}',
            "--speculative-config",
            '{"method":"ngram"}',  # non-default JSON spacing: kept as text
            "--allowed-origins",
            '["http://a"]',
            "--long-prefill-token-threshold",
            "7",
            "--no-enable-log-requests",
            "--chat-template",
            "true",  # the string "true", not a switch
            "--compilation-config.pass_config.x",
            "None",
        ),
    ),
]


@pytest.mark.parametrize("flags", ROUND_TRIP_FLAGS, ids=["bare", "every-declared", "extras"])
def test_export_then_import_gives_the_same_flags(flags: ServeFlags) -> None:
    export = export_config_yaml(flags)
    assert export.left_out == ()
    back = import_config_yaml(export.text)
    assert back.flags == flags
    assert back.flags.to_argv() == flags.to_argv()


def test_import_then_export_then_import_is_stable(cli: VllmCli) -> None:
    text = """\
model: m
max_model_len: 2k
enable-prefix-caching: false
served-model-name: [a]
compilation-config: {mode: 0}
tensor-parallel-size: 2
disable-log-stats: true
"""
    first = import_config_yaml(text, cli=cli).flags
    second = import_config_yaml(export_config_yaml(first, cli=cli).text, cli=cli).flags
    assert second == first


def test_extra_args_naming_a_declared_flag_come_back_declared() -> None:
    flags = ServeFlags(model="m", extra_args=("--max-model-len", "2048"))
    back = import_config_yaml(export_config_yaml(flags).text).flags
    assert back.max_model_len == 2048 and back.extra_args == ()
    assert back.to_argv() == flags.to_argv()
