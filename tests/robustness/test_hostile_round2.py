"""The second hostile round (tools/hostile_probe.py found each): nesting past Python's
recursion in TOML and in JSON from a server or a command line, numbers no load can have,
secrets by the shape of a token, control characters in a command line, a profile name
that is no profile in the console, an evidence line of a mebibyte, options typed at parse
time in every subcommand."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest
from fakes.runs import served_run
from hypothesis import given, settings
from hypothesis import strategies as st
from property_profiles import examples
from pydantic import ValidationError

from tui.app.cli import main
from tui.domain.diagnosis import EVIDENCE_CHARS, Diagnosis
from tui.domain.errors import VtcError
from tui.domain.export import EXPORT_FORMATS, export_run
from tui.domain.flags.config_yaml import ConfigYamlError, load_config_mapping
from tui.domain.flags.serve import ServeFlags
from tui.domain.flags.validation import flags_from_argv
from tui.domain.json_text import loads_json
from tui.domain.presets import PresetError, parse_preset
from tui.domain.secret_names import holds_secret, secret_parts
from tui.domain.toml_text import loads_toml
from tui.domain.workload import LoadSpec
from tui.load.account import _payload_text
from tui.modes import ConsoleOptions, build_session
from tui.server.relay import secrets_from_env
from tui.server.repro import capture_reproduction
from tui.store.board_file import read_board
from tui.telemetry.scrape import parse_families
from tui.telemetry.vllm_metrics import scrape_from_families
from tui.tune.journal import load_spec_from_journal, read_summary
from tui.tune.spec_file import SweepSpecError, load_spec

DEEP = 200_000
EXAMPLES = settings(max_examples=examples(60), deadline=None)

# Credentials by their issuers' documented shapes, under names that say nothing.
TOKENS = {
    "EXTRA_HEADER": "Authorization: Bearer abcdefSECRETbearer123456",
    "HUB": "hf_S3cr3tS3cr3tS3cr3tS3cr3tS3cr3tAB",
    "OAI": "sk-live0123456789abcdefghij",
    "OAI_PROJ": "sk-proj-AbCdEf0123456789abcdefghij",
    "AWS_ID": "AKIAIOSFODNN7EXAMPLE",
    "GH": "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "SLACK": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp",
    "JWT": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcdefSIGNATURE123",
    "DSN": "postgres://user:p4ssw0rdXYZ@db/x",
}
NOT_TOKENS = {
    "TASK": "task-list-of-everything-here",
    "MODE": "basic",
    "HF_HOME": "/data/hf_cache_folder_for_models_0123",
    "SKIP": "ask-someone-about-it-later",
}


def _one_line(exc: BaseException) -> str:
    line = exc.one_line() if isinstance(exc, VtcError) else str(exc)
    assert "\n" not in line and len(line) <= 2001
    return line


# -- nesting past the parser's recursion ---------------------------------------------------


@pytest.mark.parametrize("text", ["a = " + "[" * DEEP, "a = " + "{b = " * DEEP])
def test_toml_nested_past_the_recursion_limit_is_a_decode_error(text: str) -> None:
    with pytest.raises(tomllib.TOMLDecodeError, match="nested too deep"):
        loads_toml(text)


def test_a_sweep_spec_nested_too_deep_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.toml"
    path.write_text("a = " + "[" * DEEP)
    with pytest.raises(SweepSpecError) as caught:
        load_spec(path)
    assert "not TOML: nested too deep" in _one_line(caught.value)


def test_a_preset_nested_too_deep_is_one_line() -> None:
    with pytest.raises(PresetError) as caught:
        parse_preset("x = " + "[" * DEEP, origin="deep.toml")
    assert "nested too deep" in _one_line(caught.value)


@pytest.mark.parametrize("text", ["[" * DEEP, '{"a":' * DEEP])
def test_json_in_memory_nested_too_deep_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="nested too deep"):
        loads_json(text)


def test_a_server_event_nested_too_deep_fails_the_request_with_a_value_error() -> None:
    with pytest.raises(ValueError):
        _payload_text(b"[" * DEEP, "completions")
    # choices that are not a list are no token chunk, not an IndexError/KeyError
    assert _payload_text(b'{"choices": {"0": 1}}', "completions") == ""


def test_a_command_line_json_flag_nested_too_deep_is_one_flag_error() -> None:
    with pytest.raises(VtcError) as caught:
        flags_from_argv(["m", "--speculative-config", "[" * DEEP])
    _one_line(caught.value)


@pytest.mark.parametrize("content", ["[" * DEEP, '{"pinned": ' * DEEP, '{"pinned": NaN}'])
def test_a_board_file_that_is_no_board_gives_the_defaults(tmp_path: Path, content: str) -> None:
    path = tmp_path / "runs.board.json"
    path.write_text(content)
    assert read_board(path).pinned is None


def test_a_sweep_journal_nested_too_deep_is_no_summary_and_one_line(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text("[" * DEEP + "\n")
    assert read_summary(path) is None
    with pytest.raises(VtcError) as caught:
        load_spec_from_journal(path)
    assert "sweep journal" in _one_line(caught.value)


def test_a_journal_whose_spec_is_not_an_object_is_no_summary(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text(json.dumps({"spec": [1, 2]}) + "\n")
    assert read_summary(path) is None


# -- numbers no load can have --------------------------------------------------------------


@pytest.mark.parametrize(
    "field",
    [
        {"num_prompts": 10**15},
        {"input_len": 10**11},
        {"output_len": 10**11},
        {"max_concurrency": 10**15},
        {"num_warmups": 10**15},
        {"seed": -1},
    ],
)
def test_a_load_refuses_numbers_no_load_can_have(field: dict[str, int]) -> None:
    with pytest.raises(ValidationError):
        LoadSpec(**field)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "argv",
    [
        ["--port", "0"],
        ["--port", "70000"],
        ["--cache-hit-pct", "nan"],
        ["--cache-hit-pct", "100"],
        ["--custom-output-len", "0"],
        ["--sharegpt-output-len", "-1"],
        ["--num-prompts", "1000000000000000"],
        ["--seed", "-1"],
    ],
)
def test_every_bench_number_is_checked_by_argparse(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["bench", "--base-url", "http://127.0.0.1:9", *argv])
    assert caught.value.code == 2
    assert f"argument {argv[0]}:" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["ftp://x", "not a url", "http://h:99999", "\x1b[31mx"])
def test_calibrate_refuses_a_url_that_is_no_server_at_parse_time(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["calibrate", "--name", "p", url])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "argument url:" in err and "\x1b" not in err


def test_a_sweep_spec_budget_of_infinite_seconds_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "inf.toml"
    spec.write_text(
        'name = "x"\nstrategy = "grid"\n[base]\nmodel = "m"\n'
        "[parameters]\nmax_num_seqs = [8]\n[workload]\nnum_prompts = 4\n"
        "[budget]\nmax_wall_s = inf\n"
    )
    with pytest.raises(SweepSpecError) as caught:
        load_spec(spec)
    assert "budget.max_wall_s" in _one_line(caught.value)


# -- a named profile that is none ----------------------------------------------------------


@pytest.mark.parametrize("demo", [True, False])
def test_a_profile_name_that_is_no_profile_is_refused_in_every_console_mode(
    tmp_path: Path, demo: bool
) -> None:
    options = ConsoleOptions(
        demo=demo, sim_profile="nosuch", data_dir=tmp_path, vllm="/bin/true", model="m"
    )
    with pytest.raises(VtcError) as caught:
        build_session(options)
    assert "no profile named 'nosuch'" in _one_line(caught.value)


# -- secrets by the shape of a token -------------------------------------------------------


def test_tokens_are_secrets_by_their_shape_whatever_the_name() -> None:
    for name, value in TOKENS.items():
        assert holds_secret(name, value), name
        assert secret_parts(value), name
    for name, value in NOT_TOKENS.items():
        assert not holds_secret(name, value), name


def test_no_export_record_or_log_holds_a_token_shaped_value() -> None:
    repro = capture_reproduction(
        ["/opt/venv/bin/vllm", "serve", "m"], launch_env=TOKENS, vllm_version="0.32.0"
    )
    run = served_run(1, repro=repro)
    shown = run.model_dump_json() + "".join(export_run(run, f).text for f in EXPORT_FORMATS)
    for value in TOKENS.values():
        assert secret_parts(value)[-1] not in shown
    assert {"HUB", "OAI", "JWT"} <= set(repro.secret_env)
    redacted = secrets_from_env(TOKENS)
    assert "abcdefSECRETbearer123456" in redacted and TOKENS["HUB"] in redacted


@EXAMPLES
@given(
    prefix=st.sampled_from(["hf_", "sk-", "ghp_", "glpat-"]),
    body=st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789", min_size=36),
    name=st.from_regex(r"[A-Z][A-Z_]{0,12}", fullmatch=True),
)
def test_a_prefixed_token_is_a_secret_under_any_name(prefix: str, body: str, name: str) -> None:
    assert holds_secret(name, prefix + body)
    assert holds_secret(name, f"--header=x {prefix}{body}")


# -- control characters and command lines --------------------------------------------------


@pytest.mark.parametrize(
    "flags",
    [
        {"model": "m\x1b[31m"},
        {"model": "m\nx"},
        {"model": "m", "served_model_name": "a\tb"},
        {"model": "m", "extra_args": ("--foo", "a\x1bb")},
    ],
)
def test_control_characters_are_refused_in_a_command_line(flags: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="control character"):
        ServeFlags(**flags)  # type: ignore[arg-type]


@EXAMPLES
@given(st.from_regex(r"-[A-Za-z:._-]{1,12}", fullmatch=True))
def test_a_text_value_starting_with_a_dash_reads_back(host: str) -> None:
    # hypothesis found host "-:" rendered "--host -:", which argparse reads as a missing value
    flags = ServeFlags(model="m", host=host)
    assert flags_from_argv(flags.to_argv()) == flags


# -- bounded lines --------------------------------------------------------------------------


def test_a_diagnosis_quotes_at_most_one_screen_line_of_evidence() -> None:
    diagnosis = Diagnosis(kind="unknown", summary="s", evidence="x" * 2**20)
    assert len(diagnosis.evidence) == EVIDENCE_CHARS and diagnosis.evidence.endswith("…")
    assert len(json.dumps(diagnosis.to_json_dict())) < 2 * EVIDENCE_CHARS


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "missing"])
def test_the_console_refuses_an_attach_log_that_is_no_file_before_it_starts(
    tmp_path: Path, kind: str
) -> None:
    log = {"device": Path("/dev/zero"), "folder": tmp_path, "missing": tmp_path / "no.log"}.get(
        kind, tmp_path / "fifo"
    )
    if kind == "fifo":
        os.mkfifo(log)
    options = ConsoleOptions(attach="http://127.0.0.1:9", attach_log=log, data_dir=tmp_path)
    with pytest.raises(VtcError) as caught:
        build_session(options)  # at once: a FIFO is never opened for reading
    assert "--attach-log" in _one_line(caught.value)


def test_an_attach_log_without_attach_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("INFO\n")
    with pytest.raises(VtcError, match="--attach-log goes with --attach"):
        build_session(ConsoleOptions(demo=True, attach_log=log, data_dir=tmp_path))


@pytest.mark.parametrize("executable", ["relative/vllm", "vllm", "/opt/\x1b[31m/vllm"])
def test_systemd_exec_must_be_an_absolute_path(
    executable: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["export", "--demo", "--as", "systemd", "--exec", executable, "last"])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "must be an absolute path" in err and "\x1b" not in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--demo", "--gpus", "a,,-1"], "argument --gpus: GPU indices like 0,1,2"),
        (["--gpus", "0,0"], "argument --gpus: a GPU named twice"),
        (["--demo", "--sim-gpu", "nosuch"], "argument --sim-gpu: unknown simulated GPU"),
        (["--ray-gpus", "2"], "--ray-gpus goes with --ray"),
        (["--demo", "--ray-gpus", "2"], "--ray-gpus goes with --ray"),
        (["--sim-gpu", "h100-80gb"], "--sim-gpu is the demo's simulated GPU"),
        (["--demo", "--gpus", "0"], "--gpus names real GPUs"),
    ],
)
def test_sweep_options_are_checked_alike_in_every_mode(
    argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(["sweep", *argv, str(tmp_path / "never-read.toml")])
    except SystemExit as exc:  # argparse's own refusal
        code = int(exc.code or 0)
    assert code == 2 and said in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("a: " + "[" * DEEP, "nested deeper than"),
        ("a: " + "[" * 5000 + "]" * 5000, "nested deeper than"),
        ("a: &a [x, x, x]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\n", "an alias"),
    ],
)
def test_a_config_file_too_deep_or_an_alias_bomb_is_one_line(text: str, said: str) -> None:
    with pytest.raises(ConfigYamlError) as caught:
        load_config_mapping(text)  # at once: the event stream is read without recursion
    assert said in _one_line(caught.value)


def test_a_metrics_sample_no_reader_may_use_is_dropped_at_the_parse() -> None:
    page = (
        'vllm:num_requests_running{model_name="m"} 1e308\n'
        'vllm:num_requests_waiting{model_name="m"} -5\n'
        'vllm:kv_cache_usage_perc{model_name="m"} NaN\n'
        "# TYPE vllm:prompt_tokens counter\n"
        f'vllm:prompt_tokens_total{{model_name="m"}} {"9" * 400}\n'
        'vllm:num_preemptions_total{model_name="m"} 3\n'
    )
    # a 400-digit integer made math.isfinite raise OverflowError in every reading: top
    # said "no complete answer" for a server that answered
    values = {s.name: s.value for f in parse_families(page) for s in f.samples}
    assert values == {"vllm:num_preemptions_total": 3}
    assert scrape_from_families(parse_families(page), 0.0).num_waiting is None
