"""The run's environment is part of its configuration (issue 19).

Declared once (``tui/domain/flags/run_env.py``), carried by ``ServeFlags.env``: validated
(names, vLLM's value rules, no secret ever kept or echoed), stored, diffed, exported with
secrets by name only, and set by a diagnosis fix that ``f`` applies.
"""

from __future__ import annotations

import json

import pytest
import yaml
from fakes.runs import served_run

from tui.domain.board.noise import config_key
from tui.domain.board.table import build_table, differing_flags, flag_value, parse_flag_match
from tui.domain.diagnosis import Diagnosis, Fix
from tui.domain.export import EXPORT_FORMATS, export_run
from tui.domain.fix_loop import choose_fix
from tui.domain.flags.problems import FlagError
from tui.domain.flags.run_env import DECLARED_ENV, parse_env_text
from tui.domain.flags.serve import ServeFlags, stored_context
from tui.domain.flags.serve_diff import diff_flags
from tui.domain.flags.validation import flags_from_values, validate_form
from tui.domain.presets import Preset, PresetError, parse_preset, render_preset
from tui.domain.results import Reproduction, RunRecord, RunStatus

RUNNER = "VLLM_USE_V2_MODEL_RUNNER"
SECRET = "hf_s3cr3t_value_never_shown"


def test_the_form_text_parses_into_sorted_pairs() -> None:
    pairs, problems = parse_env_text(f"{RUNNER}=0 CUDA_VISIBLE_DEVICES='0,1' EMPTY=")
    assert problems == []
    assert pairs == (("CUDA_VISIBLE_DEVICES", "0,1"), ("EMPTY", ""), (RUNNER, "0"))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (f"{RUNNER}=yes", "invalid literal for int() with base 10: 'yes'"),  # vLLM's envs.py
        ("VLLM_LOGGING_LEVEL=LOUD", "expected one of DEBUG, INFO, WARNING, ERROR, CRITICAL"),
        ("1BAD=1", "not a variable name"),
        ("A-B=1", "not a variable name"),
        ("A=1 A=2", "given twice"),
        ("PYTHONUNBUFFERED=0", "a run may not set it"),
        ("JUSTAWORD", "expected NAME=value"),
        ("A='unclosed", "shell quoting"),
    ],
)
def test_refused_names_and_values_say_why_in_one_line(text: str, words: str) -> None:
    flags, problems = validate_form("m", {}, "", None, text)
    assert flags is None
    assert any(words in p.line for p in problems), [p.line for p in problems]
    assert all(p.field == "env" for p in problems)  # shown under the environment field


@pytest.mark.parametrize("name", ["HF_TOKEN", "VLLM_API_KEY", "OPENAI_API_KEY", "AWS_SECRET"])
def test_a_secret_is_refused_by_name_and_its_value_never_repeated(name: str) -> None:
    flags, problems = validate_form("m", {}, "", None, f"{name}={SECRET}")
    assert flags is None
    assert [p.field for p in problems] == ["env"]
    assert name in problems[0].line and "vtc's own environment" in problems[0].line
    assert all(SECRET not in (p.line + repr(p)) for p in problems)
    with pytest.raises(FlagError) as caught:
        ServeFlags(model="m").replace(env={name: SECRET})
    assert SECRET not in str(caught.value) and SECRET not in repr(caught.value.problems)


def test_a_stored_record_loses_a_secret_but_keeps_the_rest() -> None:
    data = {"model": "m", "env": {"HF_TOKEN": SECRET, RUNNER: "0"}}
    flags = ServeFlags.model_validate(data, context=stored_context())
    assert flags.environment == {RUNNER: "0"}


def test_env_is_hashable_order_free_and_survives_json_and_presets() -> None:
    a = ServeFlags(model="m", env={RUNNER: "0", "CUDA_VISIBLE_DEVICES": "1"})
    b = ServeFlags(model="m", env=[("CUDA_VISIBLE_DEVICES", "1"), (RUNNER, "0")])
    assert a == b and hash(a) == hash(b)
    assert json.loads(a.model_dump_json())["env"] == {"CUDA_VISIBLE_DEVICES": "1", RUNNER: "0"}
    assert ServeFlags.model_validate_json(a.model_dump_json()) == a
    table = a.to_toml_dict()
    assert table["env"] == {"CUDA_VISIBLE_DEVICES": "1", RUNNER: "0"}
    assert flags_from_values({"model": "m", **table}) == a  # a preset's [flags] table
    assert a.to_argv() == ["m"]  # never in the argv


def test_a_preset_env_of_the_wrong_type_is_one_line() -> None:
    with pytest.raises(FlagError, match="NAME = value"):
        flags_from_values({"model": "m", "env": ["VLLM_USE_V2_MODEL_RUNNER"]})


def test_every_declared_variable_says_what_it_does_and_where_vllm_reads_it() -> None:
    assert RUNNER in DECLARED_ENV
    assert all(spec.help and spec.source for spec in DECLARED_ENV.values())


def _failed(flags: ServeFlags, diagnosis: Diagnosis, run_id: int) -> RunRecord:
    return RunRecord(id=run_id, flags=flags, status=RunStatus.FAILED, diagnosis=diagnosis)


UVA = Diagnosis(
    kind="model_runner_unsupported",
    summary="UVA is not available",
    fixes=[Fix(title="V1 runner", env={RUNNER: "0"})],
)


def test_an_env_fix_is_applied_to_the_runs_environment() -> None:
    flags = ServeFlags(model="m", max_num_seqs=8, env={"KEEP": "x", "OLD": "1"})
    fix = Fix(title="t", set={"max_num_seqs": 4}, env={RUNNER: "0", "OLD": None})
    fixed = fix.applied_to(flags)
    assert fixed.max_num_seqs == 4 and fixed.environment == {"KEEP": "x", RUNNER: "0"}


def test_f_carries_the_variable_into_the_form_and_never_loops_on_it() -> None:
    first = _failed(ServeFlags(model="m"), UVA, 1)
    choice = choose_fix([first])
    assert choice.fix is not None and choice.settings == {"env": ((RUNNER, "0"),)}
    # the fixed run failed the same way: the fix was tried, f says so instead of looping
    second = _failed(choice.fix.applied_to(first.flags), UVA, 2)
    again = choose_fix([first, second])
    assert again.fix is None and "tried" in again.reason


def test_the_board_diffs_the_environment_like_a_flag() -> None:
    plain = served_run(1)
    fixed = served_run(2, env={RUNNER: "0"})
    assert [(c.name, c.old, c.new) for c in diff_flags(plain.flags, fixed.flags)] == [
        ("env", "none", f"{RUNNER}=0")
    ]
    assert differing_flags([plain, fixed]) == ["env"]
    assert flag_value(fixed, "env") == f"{RUNNER}=0"
    assert parse_flag_match(f"env={RUNNER}=0").matches(fixed)
    assert config_key(plain) != config_key(fixed)  # not repeats of each other
    table = build_table([plain, fixed])
    assert "env" in [c.title for c in table.columns]


REPRO = Reproduction(
    argv=["vllm", "serve", "m"],
    env={"VLLM_ATTENTION_BACKEND": "FLASHINFER", RUNNER: "1"},
    secret_env=["HF_TOKEN"],
    vllm_version="0.33.0",
)


@pytest.mark.parametrize("fmt", EXPORT_FORMATS)
def test_every_export_carries_the_runs_environment_and_secrets_by_name(fmt: str) -> None:
    run = served_run(5, repro=REPRO, env={RUNNER: "0"})
    text = export_run(run, fmt).text
    assert RUNNER in text and "0" in text
    assert f"{RUNNER}=1" not in text and f"{RUNNER}: '1'" not in text  # the run's value wins
    assert "HF_TOKEN" in text and SECRET not in text
    assert "vllm/vllm-openai:v0.33.0" in text  # the image of the run's vLLM


def test_k8s_and_compose_set_the_variable_as_a_value() -> None:
    run = served_run(5, repro=REPRO, env={RUNNER: "0"})
    compose = yaml.safe_load(export_run(run, "compose").text)
    assert compose["services"]["vllm"]["environment"][RUNNER] == "0"
    docs = list(yaml.safe_load_all(export_run(run, "k8s").text))
    env = [
        e
        for d in docs
        if d and d.get("kind") == "Deployment"
        for c in d["spec"]["template"]["spec"]["containers"]
        for e in c["env"]
    ]
    assert {"name": RUNNER, "value": "0"} in env
    assert any(e["name"] == "HF_TOKEN" and "valueFrom" in e for e in env)


def test_a_preset_saves_and_loads_the_environment() -> None:
    flags = ServeFlags(model="m", max_num_seqs=8, env={RUNNER: "0"})
    preset = Preset(name="wsl2", description="d", source="s", flags=flags)
    text = render_preset(preset)
    assert f'{RUNNER} = "0"' in text
    assert parse_preset(text).flags == flags
    with pytest.raises(PresetError, match="HF_TOKEN holds a secret"):
        parse_preset(text.replace(RUNNER, "HF_TOKEN"))
