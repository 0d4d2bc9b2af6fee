"""The sweep spec: every value through ServeFlags/LoadSpec, the shipped specs, auto_tune's env."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from tui.domain.flags.serve import ServeFlags
from tui.domain.sweep import SweepSpec
from tui.domain.sweep.compose import ComposeError, compose, parse_values
from tui.domain.sweep.tunables import PASS_THROUGH, check_value, tunable_names
from tui.domain.workload import LoadSpec
from tui.tune.space import base_load, product, request_model
from tui.tune.spec_file import SweepSpecError, auto_tune_from_env, load_spec

PRESETS = Path(__file__).resolve().parents[2] / "presets" / "sweeps"


def spec(**changes: object) -> SweepSpec:
    data: dict[str, object] = {
        "name": "t",
        "base": {"model": "m", "flags": {"max_model_len": 4096}},
        "parameters": {"max_num_seqs": [128, 256], "max_num_batched_tokens": [4096, 8192]},
        "workload": {"input_len": 128, "output_len": 384},
    }
    data.update(changes)
    return SweepSpec.model_validate(data)


def test_a_value_out_of_range_is_refused_in_vllms_words() -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        spec(parameters={"max_num_seqs": [0, 128]})
    with pytest.raises(ValidationError, match="invalid choice: 7"):
        spec(parameters={"max_lora_rank": [7]})
    with pytest.raises(ValidationError, match="not a tunable flag"):
        spec(parameters={"port": [8000, 8001]})


def test_base_flags_go_through_the_cross_field_rules() -> None:
    with pytest.raises(ValidationError, match="must be greater than or equal to max_num_seqs"):
        spec(base={"model": "m", "flags": {"max_num_seqs": 512, "max_num_batched_tokens": 256}})


def test_lora_flags_pass_through_as_extra_arguments_and_the_load_addresses_the_adapter() -> None:
    s = spec(
        base={
            "model": "m",
            "flags": {"enable_lora": True},
            "extra_args": ["--lora-modules", "sql=/a"],
        },
        parameters={"max_lora_rank": [8, 16], "max_loras": [1, 4]},
        workload={"input_len": 64, "output_len": 32, "lora_adapter": "sql"},
    )
    flags = s.base.flags_for({"max_lora_rank": 16, "max_loras": 4})
    assert flags.extra_args == (
        "--lora-modules",
        "sql=/a",
        "--enable-lora",
        "--max-loras",
        "4",
        "--max-lora-rank",
        "16",
    )
    assert request_model(s, {"max_lora_rank": 16}) == "sql"
    no_lora = s.model_copy(update={"base": s.base.model_copy(update={"flags": {}})})
    assert request_model(no_lora, {}) is None  # without --enable-lora the base model is asked
    assert {p.name for p in PASS_THROUGH} <= set(tunable_names())


def test_ranges_workload_defaults_and_the_shared_prefix() -> None:
    s = spec(
        parameters={"gpu_memory_utilization": {"start": 0.98, "stop": 0.90, "step": -0.01}},
        workload={"input_len": 128, "output_len": 384, "cache_hit_pct": 30},
    )
    assert s.values("gpu_memory_utilization")[:3] == (0.98, 0.97, 0.96)
    assert len(s.values("gpu_memory_utilization")) == 9
    assert s.workload.load.max_concurrency is None  # bench serve's default: no cap
    load = base_load(s)
    assert (load.prefix_len, load.input_len) == (38, 90)  # auto_tune.sh: 128*30/100
    assert math.isinf(load.request_rate)


def test_product_is_first_parameter_slowest() -> None:
    combos = list(product(spec()))
    assert combos[:2] == [
        {"max_num_seqs": 128, "max_num_batched_tokens": 4096},
        {"max_num_seqs": 128, "max_num_batched_tokens": 8192},
    ]
    assert len(combos) == 4


def test_slo_keys_and_goodput_defaults() -> None:
    s = spec(slo={"p99_e2el_ms": 13000, "mean_ttft_ms": 500, "min_prefix_cache_hit_pct": 20})
    assert s.goodput_slos() == {"e2el": 13000}
    with pytest.raises(ValidationError, match="unknown SLO"):
        spec(slo={"p95_e2el_ms": 1})


def test_the_same_spec_resumes_the_same_sweep() -> None:
    assert spec().sweep_id() == spec().sweep_id()
    assert spec().sweep_id() != spec(objective="goodput").sweep_id()


def test_the_twin_options_at_their_defaults_keep_older_sweep_ids() -> None:
    import hashlib
    import json

    data = spec().model_dump(mode="json")
    del data["twin"]  # a spec as it was written before the twin strategy existed
    before = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]
    assert spec().fingerprint() == before
    assert spec(twin={"tolerance": 0.05}).fingerprint() != before


@pytest.mark.parametrize("path", sorted(PRESETS.glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_spec_loads(path: Path) -> None:
    s = load_spec(path)
    assert s.space_size() >= 2
    first = list(product(s))[:3]
    assert all(ServeFlags.model_validate(s.base.flags_for(c).model_dump()) for c in first)


def test_seed_003_spec_holds_its_lists_lengths_and_limits() -> None:
    (path,) = PRESETS.glob("*auto-tune*.toml")
    s = load_spec(path)
    assert s.strategy == "auto_tune"
    assert s.values("max_num_seqs") == (128, 256, 512)
    assert s.values("max_num_batched_tokens") == (4096, 8192, 16384)
    assert (s.workload.load.input_len, s.workload.load.output_len) == (128, 384)
    assert s.workload.cache_hit_pct == 30
    assert s.slo.limits == {"p99_e2el_ms": 13000}
    assert s.base.flags["max_model_len"] == 4096


def test_auto_tune_environment_overrides_a_spec_and_checks_the_lengths() -> None:
    (path,) = PRESETS.glob("*auto-tune*.toml")
    env = {"NUM_SEQS_LIST": "64 128", "MAX_LATENCY_ALLOWED_MS": "9000", "TP": "1"}
    s = auto_tune_from_env(env, load_spec(path))
    assert s.values("max_num_seqs") == (64, 128)
    assert s.slo.limits["p99_e2el_ms"] == 9000
    assert s.workload.load.max_concurrency is None
    defaults = auto_tune_from_env({"MODEL": "facebook/opt-125m", "INPUT_LEN": "100"})
    assert defaults.base.model == "facebook/opt-125m"
    assert defaults.values("max_num_batched_tokens") == (512, 1024, 2048, 4096)
    with pytest.raises(SweepSpecError, match=r"> MAX_MODEL_LEN = 4096"):
        auto_tune_from_env({"INPUT_LEN": "4000", "OUTPUT_LEN": "200"})


def test_a_bad_spec_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'name = "x"\n[base]\nmodel = "m"\n[parameters]\nmax_num_seqs = [0]\n[workload]\n'
    )
    with pytest.raises(SweepSpecError, match=r"bad.toml: .*greater than or equal to 1") as info:
        load_spec(bad)
    assert "\n" not in info.value.one_line()


def test_the_console_form_composes_a_spec() -> None:
    assert parse_values("enable_prefix_caching", "on, off") == [True, False]
    assert parse_values("gpu_memory_utilization", "0.86..0.9:0.02").values() == [0.86, 0.88, 0.9]
    s = compose(
        name="c",
        flags=ServeFlags(model="m", max_num_seqs=64, gpu_memory_utilization=0.9),
        load=LoadSpec(num_prompts=10),
        strategy="grid",
        objective="request_throughput",
        parameters={"max_num_seqs": "64, 128"},
        slo={"p99_itl_ms": 80.0},
        max_starts=4,
    )
    assert s.base.flags == {"gpu_memory_utilization": 0.9}  # the varied flag leaves the base
    assert s.workload.load.num_prompts == 10 and s.budget.max_starts == 4
    with pytest.raises(ComposeError, match="max_num_seqs"):
        parse_values("max_num_seqs", "64, lots")
    assert check_value("gpu_memory_utilization", 1) == 1.0
