"""Every export carries the run's flags exactly: each format parses back to the same flags."""

from __future__ import annotations

import re
import shlex

import yaml
from fakes.flag_strategies import serve_flags
from fakes.kubelet import kubelet_expand
from fakes.runs import served_run
from hypothesis import given, settings
from property_profiles import examples

from tui.domain.export import export_run
from tui.domain.flags.config_yaml import import_config_yaml
from tui.domain.flags.serve import ServeFlags
from tui.domain.flags.validation import parse_serve_argv
from tui.domain.results import Reproduction, RunRecord

EXAMPLES = settings(max_examples=examples(60), deadline=None)


def _run(flags: ServeFlags, **repro: object) -> RunRecord:
    return served_run(7).model_copy(
        update={"flags": flags, "repro": Reproduction(vllm_version="0.32.0", **repro)}  # type: ignore[arg-type]
    )


def command_argv(text: str) -> list[str]:
    """The argv of an exported command line, with its leading NAME=value assignments removed."""
    line = next(x for x in text.splitlines() if x and not x.startswith("#"))
    tokens = shlex.split(line)
    while tokens and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tokens[0]):
        tokens.pop(0)
    return tokens


def systemd_words(line: str) -> list[str]:
    """Split an ``ExecStart=`` value as systemd does (quotes, C escapes, %% and $$)."""
    words, word, quoted, i, started = [], [], False, 0, False
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line):
            nxt = line[i + 1]
            word.append({"n": "\n", ";": ";"}.get(nxt, nxt))
            i, started = i + 2, True
            continue
        if ch == '"':
            quoted, started = not quoted, True
        elif ch == " " and not quoted:
            if started:
                words.append("".join(word))
            word, started = [], False
        else:
            word.append(ch)
            started = True
        i += 1
    if started:
        words.append("".join(word))
    return [w.replace("%%", "%").replace("$$", "$") for w in words]


@EXAMPLES
@given(flags=serve_flags())
def test_the_command_reparses_to_the_same_flags(flags: ServeFlags) -> None:
    argv = command_argv(export_run(_run(flags, env={"VLLM_X": "a b"}), "command").text)
    # no PATH exported: nothing in the export can change which vllm the shell finds
    assert argv[0] == "vllm" or (argv[0].startswith("/") and argv[0].endswith("/vllm"))
    assert argv[1] == "serve"
    assert parse_serve_argv(["vllm", *argv[1:]]).to_flags() == flags


@EXAMPLES
@given(flags=serve_flags())
def test_the_config_yaml_imports_back_to_the_same_flags(flags: ServeFlags) -> None:
    text = export_run(_run(flags), "yaml").text
    assert isinstance(yaml.safe_load(text), dict)
    assert import_config_yaml(text).flags == flags


@EXAMPLES
@given(flags=serve_flags())
def test_compose_and_k8s_pass_the_same_flags_to_the_image(flags: ServeFlags) -> None:
    run = _run(flags)
    compose = yaml.safe_load(export_run(run, "compose").text)
    command = [a.replace("$$", "$") for a in compose["services"]["vllm"]["command"]]
    assert parse_serve_argv(["serve", *command]).to_flags() == flags
    k8s = yaml.safe_load(export_run(run, "k8s").text)
    args = k8s["spec"]["template"]["spec"]["containers"][0]["args"]
    assert parse_serve_argv(["serve", *(kubelet_expand(a) for a in args)]).to_flags() == flags


@EXAMPLES
@given(flags=serve_flags())
def test_systemd_execstart_splits_back_to_the_same_flags(flags: ServeFlags) -> None:
    text = export_run(_run(flags, env={"VLLM_X": "50% of $HOME"}), "systemd").text
    exec_line = next(x for x in text.splitlines() if x.startswith("ExecStart="))
    words = systemd_words(exec_line.removeprefix("ExecStart="))
    assert words[1] == "serve"
    assert parse_serve_argv(["serve", *words[2:]]).to_flags() == flags
    env_line = next(x for x in text.splitlines() if x.startswith("Environment="))
    assert systemd_words(env_line.removeprefix("Environment=")) == ["VLLM_X=50% of $HOME"]
