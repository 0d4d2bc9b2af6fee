"""Secrets and shells in the run environment (issue 33): secrets found by the shape of a
value as well as by name, kept out of every output; exports quoted for their target
(hypothesis: shell, YAML and Kubernetes round-trips), control characters refused, the vllm
executable named by absolute path."""

from __future__ import annotations

import shlex

import pytest
import yaml
from fakes.kubelet import kubelet_expand
from fakes.runs import served_run
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from property_profiles import examples
from pydantic import ValidationError

from tui.domain.errors import VtcError
from tui.domain.export import export_run
from tui.domain.export.launch import ExportRefused
from tui.domain.flags.run_env import parse_env_text, without_secrets
from tui.domain.flags.serve import ServeFlags, stored_context
from tui.domain.results import Reproduction, RunRecord
from tui.domain.secret_names import holds_secret, secret_parts
from tui.server.relay import secrets_from_env
from tui.server.repro import capture_reproduction

SHAPED = {
    "HF_ENDPOINT": "https://user:hunter22@hub.example.com/mirror",
    "DATABASE_URL": "postgresql://app:s3cr3t-pw@db:5432/runs",
    "PGOPTS": "host=db user=app password=s3cr3t-pw",
    "MIRROR": "https://ghp_tokenvalue123@mirror.example.com",
}
PLAIN = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "INFO", "HF_HOME": "/data/hf"}
PASSWORDS = ("hunter22", "s3cr3t-pw", "ghp_tokenvalue123")

EXAMPLES = settings(max_examples=examples(80), deadline=None)


def _run(env: dict[str, str], argv0: str = "/opt/venv/bin/vllm", **flags: object) -> RunRecord:
    try:
        served = ServeFlags(model="m", **flags)  # type: ignore[arg-type]
    except ValidationError:
        assume(False)  # a name vLLM itself refuses (blank): not an export's case
    repro = Reproduction(argv=[argv0, "serve", "m"], env=env, vllm_version="0.32.0")
    return served_run(3).model_copy(update={"repro": repro, "flags": served})  # type: ignore[arg-type]


def test_secrets_are_found_by_the_shape_of_their_value() -> None:
    for name, value in SHAPED.items():
        assert holds_secret(name, value), name
        assert any(p in value for p in secret_parts(value))
    for name, value in PLAIN.items():
        assert not holds_secret(name, value), name


def test_a_run_environment_refuses_a_secret_value_naming_only_the_variable() -> None:
    pairs, problems = parse_env_text("HF_ENDPOINT=https://user:hunter22@hub.example.com")
    assert pairs == () and len(problems) == 1
    assert (
        problems[0].startswith("HF_ENDPOINT's value holds a secret")
        and "hunter22" not in problems[0]
    )
    assert without_secrets(SHAPED.items()) == ()  # a record read back loses them


@pytest.mark.parametrize("value", ["a\x1b[31mred", "tab\there", "bell\x07", "c1\x9b"])
def test_a_run_environment_refuses_control_characters(value: str) -> None:
    _, problems = parse_env_text(shlex.join([f"VLLM_X={value}"]))
    assert problems and "control character" in problems[0]


def test_no_export_nor_record_holds_a_value_shaped_secret() -> None:
    repro = capture_reproduction(
        ["/opt/venv/bin/vllm", "serve", "m"], inherited_env={**SHAPED, **PLAIN}
    )
    # only the variables that change vLLM are recorded; HF_ENDPOINT is one: as a secret
    assert "HF_ENDPOINT" in repro.secret_env and not set(SHAPED) & set(repro.env)
    old = _run({**SHAPED, **PLAIN})  # an older record that stored them
    shown = old.model_dump_json()  # what `vtc runs --json` and the history hold
    for fmt in ("command", "yaml", "compose", "systemd", "k8s"):
        shown += export_run(old, fmt).text
    for password in PASSWORDS:
        assert password not in shown
    assert "HF_HUB_OFFLINE" in shown


def test_the_log_relay_redacts_the_secret_part_of_a_shaped_value() -> None:
    redacted = secrets_from_env({**SHAPED, **PLAIN})
    assert set(PASSWORDS) <= set(redacted)
    assert "1" not in redacted and "INFO" not in redacted


def test_the_command_names_the_vllm_the_run_used_by_absolute_path() -> None:
    run = _run({"PATH": "/tmp/evil:/usr/bin"})
    line = export_run(run, "command").text.splitlines()[-1]
    words = shlex.split(line)
    assert words[0] == "PATH=/tmp/evil:/usr/bin" and words[1] == "/opt/venv/bin/vllm"
    # not a recorded vllm, and a PATH exported: the configured absolute path, never a lookup
    pathed = _run({"PATH": "/tmp/evil:/usr/bin"}, argv0="python")
    assert (
        shlex.split(export_run(pathed, "command").text.splitlines()[-1])[1] == "/usr/local/bin/vllm"
    )
    # not a recorded vllm, no PATH exported: the bare name the operator's own shell finds
    bare = _run({}, argv0="python")
    assert shlex.split(export_run(bare, "command").text.splitlines()[-1])[0] == "vllm"


def test_an_export_refuses_a_control_character_with_one_line() -> None:
    # refused at entry now; a record stored before that holds one (read back as stored)
    stored = ServeFlags.model_validate(
        {"model": "m", "served_model_name": "a\x1b]52;c;evil\x07"}, context=stored_context()
    )
    run = _run({}).model_copy(update={"flags": stored})
    for fmt in ("command", "k8s"):
        with pytest.raises(ExportRefused) as caught:
            export_run(run, fmt)
        line = caught.value.one_line()
        assert line.startswith("cannot export this run") and "\x1b" not in line
        assert isinstance(caught.value, VtcError)


# -- properties: quoting round-trips for each target ------------------------------------------
values = st.text(
    st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\x85\u2028\u2029"),
    max_size=40,
).filter(lambda v: not holds_secret("VLLM_X", v))


@EXAMPLES
@given(value=values, name=values.filter(bool))
def test_shell_export_splits_back_to_the_run(value: str, name: str) -> None:
    run = _run({"VLLM_X": value}, served_model_name=name)
    line = export_run(run, "command").text.splitlines()[-1]
    words = shlex.split(line)
    assert words[0] == f"VLLM_X={value}"
    assert words[1:] == ["/opt/venv/bin/vllm", "serve", *run.flags.to_argv()]


@EXAMPLES
@given(value=values, name=values.filter(bool))
def test_yaml_exports_load_back_to_the_same_values(value: str, name: str) -> None:
    run = _run({"VLLM_X": value}, served_model_name=name)
    compose = yaml.safe_load(export_run(run, "compose").text)["services"]["vllm"]
    assert compose["environment"]["VLLM_X"].replace("$$", "$") == value
    k8s = yaml.safe_load(export_run(run, "k8s").text)
    container = k8s["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert kubelet_expand(env["VLLM_X"]) == value  # never a $(VAR) the kubelet expands
    assert [kubelet_expand(a) for a in container["args"]] == run.flags.to_argv()
    config = yaml.safe_load(export_run(run, "yaml").text)
    assert config.get("served-model-name") in (name, [name])


@EXAMPLES
@given(var=st.from_regex(r"[A-Z_]{1,8}", fullmatch=True), prefix=values)
def test_kubernetes_never_leaves_an_expandable_reference(var: str, prefix: str) -> None:
    value = f"{prefix}$({var})"
    run = _run({"VLLM_X": value}, served_model_name=f"$({var})")
    container = yaml.safe_load(export_run(run, "k8s").text)["spec"]["template"]["spec"][
        "containers"
    ][0]
    for text in [e["value"] for e in container["env"] if "value" in e] + container["args"]:
        kubelet_expand(text)  # raises if the kubelet would expand anything
