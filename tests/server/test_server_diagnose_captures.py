"""diagnose() on every real CPU vLLM 0.32.0 failure capture (tests/captures/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.domain.flags.serve import ServeFlags
from tui.server.diagnose import diagnose

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def _log(name: str) -> str:
    return (CAPTURES / name).read_text(encoding="utf-8")


def test_every_failure_capture_is_covered_here() -> None:
    # A capture added to the folder without a test below would go unchecked.
    tested = {
        "fail_a1_maxlen65536_kvbytes16M.log",
        "fail_a2_maxlen4096_gpublocks8.log",
        "fail_a3_kvcachespace0.log",
        "fail_a4_default_mem_util.log",
        "fail_b1_block_size_7.log",
        "fail_b2_gpu_mem_util_1_5.log",
        "fail_b3_max_num_seqs_0.log",
        "fail_b4_unknown_flag.log",
        "fail_c1_maxlen_above_maxpos.log",
        "fail_d_port_in_use.log",
        "try_headdim16_kv1.log",
        "fail_e1_model_not_found.log",
        "fail_e2_tp3.log",
        "fail_e3_trust_remote_code.log",
        "fail_e4_tokenizer.log",
    }
    present = {p.name for p in CAPTURES.glob("fail_*.log")} | {"try_headdim16_kv1.log"}
    assert present == tested


def test_a1_max_model_len_above_kv_capacity() -> None:
    d = diagnose(_log("fail_a1_maxlen65536_kvbytes16M.log"), exit_code=1)
    assert d.kind == "kv_cache_too_small"
    assert d.facts["max_model_len"] == 65536
    assert d.facts["needed_gib"] == 0.03
    assert d.facts["available_gib"] == 0.02
    assert d.facts["estimated_max_model_len"] == 32640
    assert d.facts["block_size"] == 128  # CPU default: no --block-size in non-default args
    assert d.facts["device"] == "cpu"
    assert d.facts["exit_code"] == 1
    assert d.fixes[0].set == {"max_model_len": 32640}  # 255 blocks of 128
    # 16 MiB held 256 blocks (255 + the null block): 64 KiB per block; 65536 tokens need
    # 512 blocks + the null block = 513 * 64 KiB, rounded up to whole MiB = 33 MiB.
    assert d.fixes[1].set == {"kv_cache_memory_bytes": 33 * 2**20}
    assert "To serve at least one request" in d.evidence
    assert "EngineCore" in d.evidence  # the root cause, not the API server's wrapper
    assert "65536" in d.summary and "32640" in d.summary


def test_a1_block_size_from_flags_rounds_the_estimate_down() -> None:
    flags = ServeFlags(model="/models/tiny-llama-128k", max_model_len=65536, block_size=96)
    d = diagnose(_log("fail_a1_maxlen65536_kvbytes16M.log"), flags=flags)
    assert d.facts["block_size"] == 96
    assert d.fixes[0].set == {"max_model_len": 32640 // 96 * 96}


def test_a2_gpu_blocks_override() -> None:
    d = diagnose(_log("fail_a2_maxlen4096_gpublocks8.log"), exit_code=1)
    assert d.kind == "kv_cache_too_small"
    assert d.facts["max_model_len"] == 4096
    assert d.facts["estimated_max_model_len"] == 896
    assert d.facts["num_gpu_blocks_override"] == 8
    assert d.fixes[0].set == {"max_model_len": 896}
    # 4096 / 128 = 32 blocks, plus the null block.
    assert d.fixes[1].set == {"num_gpu_blocks_override": 33}
    assert "0.0 GiB" not in d.summary  # both GiB figures round to 0.0 here: left out


def test_a3_kv_cache_space_zero() -> None:
    d = diagnose(_log("fail_a3_kvcachespace0.log"), exit_code=1)
    assert d.kind == "no_kv_cache_memory"
    assert d.facts["kv_gib"] == 0.0
    assert d.facts["total_gib"] == 8.34
    assert d.fixes[0].set == {"kv_cache_memory_bytes": 2**30}
    assert "No available memory for the cache blocks" in d.evidence


def test_a4_default_utilization_above_free_node_memory() -> None:
    d = diagnose(_log("fail_a4_default_mem_util.log"), exit_code=1)
    assert d.kind == "insufficient_free_memory"
    assert d.facts["free_gib"] == 7.02
    assert d.facts["total_gib"] == 8.34
    assert d.facts["requested_utilization"] == 0.92
    assert d.facts["requested_gib"] == 7.67
    # floor((7.02 - 0.005) / (8.34 + 0.005), 0.01) = 0.84; 0.84 * 8.34 = 7.01 <= 7.02
    assert d.fixes[0].set == {"gpu_memory_utilization": 0.84}
    assert d.fixes[1].set == {"kv_cache_memory_bytes": 2**30}  # min(1 GiB, free / 2)
    assert "Available memory on node 0" in d.evidence


def test_b1_block_size_7() -> None:
    d = diagnose(_log("fail_b1_block_size_7.log"), exit_code=1)
    assert d.kind == "unsupported_block_size"
    assert d.facts["block_size"] == 7
    assert d.facts["block_multiple"] == 32
    assert d.fixes[0].set == {"block_size": 32}
    assert "No common block size for 7" in d.evidence


def test_b2_gpu_memory_utilization_above_one() -> None:
    d = diagnose(_log("fail_b2_gpu_mem_util_1_5.log"), exit_code=1)
    assert d.kind == "invalid_flag_value"
    assert d.facts["config"] == "CacheConfig"
    assert d.facts["flag"] == "gpu_memory_utilization"
    assert d.facts["value"] == 1.5
    assert d.facts["bound"] == "<= 1"
    assert d.fixes[0].set == {"gpu_memory_utilization": 1.0}
    assert isinstance(d.fixes[0].set["gpu_memory_utilization"], float)


def test_b3_max_num_seqs_zero_fixes_only_the_flag_that_was_set() -> None:
    d = diagnose(_log("fail_b3_max_num_seqs_0.log"), exit_code=1)
    assert d.kind == "invalid_flag_value"
    assert d.facts["config"] == "SchedulerConfig"
    assert d.facts["flag"] == "max_num_seqs"
    assert d.facts["value"] == 0
    assert d.facts["bound"] == ">= 1"
    assert [e["flag"] for e in d.facts["errors"]] == ["max_num_batched_tokens", "max_num_seqs"]
    # max_num_batched_tokens was derived from max_num_seqs (not set): only the root is fixed.
    assert d.fixes[0].set == {"max_num_seqs": 1}


@pytest.mark.parametrize(
    ("extra", "kept"),
    [
        (("--max-num-seqs", "0"), ()),
        (("--max_num_seqs=0", "--seed", "3"), ("--seed", "3")),
    ],
)
def test_b3_fix_also_removes_the_bad_pass_through_value(
    extra: tuple[str, ...], kept: tuple[str, ...]
) -> None:
    # A value passed verbatim in extra_args follows the fixed flag on the command line and
    # vLLM reads the last one: the fix must take it out, or the "fixed" start fails again.
    # (ServeFlags now moves such a flag into its field and refuses 0; a run recorded by an
    # older vtc can still hold one, so the flags are built without validation here.)
    flags = ServeFlags.model_construct(model="m", extra_args=extra)
    d = diagnose(_log("fail_b3_max_num_seqs_0.log"), flags=flags, exit_code=1)
    fixed = flags.replace(**d.fixes[0].set)
    assert fixed.max_num_seqs == 1
    assert fixed.extra_args == kept


def test_b4_unknown_flag() -> None:
    d = diagnose(_log("fail_b4_unknown_flag.log"), exit_code=2)
    assert d.kind == "unknown_flag"
    assert d.facts["arguments"] == ["--no-such-flag", "3"]
    # Without the run's flags the removal cannot be written as settings: a fix that would
    # change nothing is never offered (issue 19); the summary names what to drop.
    assert d.fixes == []
    assert "--no-such-flag 3" in d.summary


def test_b4_unknown_flag_from_extra_args_is_removed_there() -> None:
    flags = ServeFlags(
        model="/models/tiny-llama", extra_args=("--seed", "1", "--no-such-flag", "3")
    )
    d = diagnose(_log("fail_b4_unknown_flag.log"), flags=flags, exit_code=2)
    assert d.fixes[0].set == {"extra_args": ("--seed", "1")}


def test_c1_max_model_len_above_max_position_embeddings() -> None:
    d = diagnose(_log("fail_c1_maxlen_above_maxpos.log"), exit_code=1)
    assert d.kind == "max_model_len_exceeds_model"
    assert d.facts["max_model_len"] == 8192
    assert d.facts["derived_max_model_len"] == 4096  # logged as 4096.0
    assert d.facts["derived_key"] == "max_position_embeddings"
    assert d.fixes[0].set == {"max_model_len": 4096}


def test_d_port_in_use_takes_the_port_from_the_log() -> None:
    d = diagnose(_log("fail_d_port_in_use.log"), exit_code=1)
    assert d.kind == "port_in_use"
    assert d.facts["port"] == 8011  # from the non-default args line
    assert d.fixes[0].set == {"port": 8012}
    assert "Errno 98" in d.evidence


def test_d_port_in_use_prefers_the_flags_port() -> None:
    flags = ServeFlags(model="/models/tiny-llama", port=9100)
    d = diagnose(_log("fail_d_port_in_use.log"), flags=flags)
    assert d.facts["port"] == 9100
    assert d.fixes[0].set == {"port": 9101}


def test_head_dim_16_engine_died_after_health_turned_200() -> None:
    d = diagnose(_log("try_headdim16_kv1.log"), exit_code=0)
    assert d.kind == "engine_died"
    assert d.facts["head_dim"] == 16
    assert 32 in d.facts["supported_head_dims"]
    assert d.facts["exit_code"] == 0
    assert d.fixes == []  # no flag makes head_dim 16 run on the CPU backend
    assert "Unsupported CPU attention configuration: head_dim=16" in d.evidence


def test_head_dim_16_without_the_specific_text_is_still_engine_death() -> None:
    # Drop the CPU-specific line: the EngineDeadError and the 500s still say "engine died".
    text = "\n".join(
        line
        for line in _log("try_headdim16_kv1.log").splitlines()
        if "Unsupported CPU attention" not in line
    )
    d = diagnose(text, exit_code=0)
    assert d.kind == "engine_died"
    assert "EngineCore encountered a fatal error" in d.evidence
    assert d.facts["exit_code"] == 0


def test_e1_missing_model_path() -> None:
    d = diagnose(_log("fail_e1_model_not_found.log"), exit_code=1)
    assert d.kind == "model_not_found"
    assert d.facts["model"] == "/tmp/vtc-diag-cap/no-such-model"
    assert d.fixes == []


def test_e2_tensor_parallel_size_3_for_4_heads() -> None:
    d = diagnose(_log("fail_e2_tp3.log"), exit_code=1)
    assert d.kind == "tp_not_divisible"
    assert d.facts["num_attention_heads"] == 4
    assert d.fixes[0].set == {"tensor_parallel_size": 2}


def test_e3_custom_code_inside_a_pydantic_block() -> None:
    # vLLM 0.32 raises it as "Value error, ..." of ModelConfig: not a flag's value.
    flags = ServeFlags(model="/tmp/vtc-diag-cap/custom-code", extra_args=("--seed", "1"))
    d = diagnose(_log("fail_e3_trust_remote_code.log"), flags=flags, exit_code=1)
    assert d.kind == "trust_remote_code_required"
    assert d.fixes[0].set == {"extra_args": ("--seed", "1", "--trust-remote-code")}


def test_e4_a_tokenizer_that_cannot_be_built() -> None:
    d = diagnose(_log("fail_e4_tokenizer.log"), exit_code=1)
    assert d.kind == "tokenizer_error"
    assert "sentencepiece" in d.summary
    assert d.fixes == []


@pytest.mark.parametrize("name", ["startup_eager_kv64M.log", "startup_pressure.log"])
def test_a_clean_run_is_not_misdiagnosed(name: str) -> None:
    d = diagnose(_log(name), exit_code=0)
    assert d.kind == "unknown"
    assert d.fixes == []
    assert "no failure found" in d.summary
    assert d.failure_found is False


def test_same_log_same_diagnosis() -> None:
    # The console and `vtc diagnose` must agree: diagnose is pure.
    text = _log("fail_a4_default_mem_util.log")
    assert diagnose(text, exit_code=1) == diagnose(text, exit_code=1)
    assert diagnose(text).to_json_dict()["kind"] == "insufficient_free_memory"


@pytest.mark.parametrize("name", sorted(p.name for p in CAPTURES.glob("*.log")))
def test_every_fix_is_a_valid_flag_change(name: str) -> None:
    # A fix the form cannot apply would be a dead button: each must validate as ServeFlags.
    base = ServeFlags(model="/models/tiny-llama", extra_args=("--no-such-flag", "3"))
    for fix in diagnose(_log(name), flags=None).fixes:
        changed = base.replace(**fix.set)
        for key, value in fix.set.items():
            assert getattr(changed, key) == value
