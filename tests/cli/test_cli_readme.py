"""The README's commands, each run or checked: every ``vtc ...`` line of its shell blocks
parses with ``vtc``'s own parser; those that need no server run here against a history in
a temp data dir (their exit codes as documented); a preset it names starts on the GPU it
declares (the simulator's memory plan), so no example uses a preset its own text says
fails; the venv and the Python version it names are the project's."""

from __future__ import annotations

import re
import shlex
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.runs import failed_run, served_run

from tui.app.cli import _parser, _split_serve_args, main
from tui.domain.flags.validation import flags_from_argv
from tui.domain.results import SweepTag
from tui.sim.catalog import resolve_gpu, resolve_model
from tui.sim.memory import SimHardware, plan_memory, resolve
from tui.store.history import RunStore
from tui.store.presets import load_presets

ROOT = Path(__file__).resolve().parent.parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
# The README's commands and its pages' (the README is short; the pages under docs/ hold the rest)
PAGES = [README] + [p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md"))]
CAPTURES = ROOT / "tests" / "captures"
# Subcommands that need no server, GPU or network: run here. Their documented exit codes.
RUNNABLE = {"presets": 0, "runs": 0, "export": 0, "report": 0, "diagnose": 0, "stop": 1}


def _shell_lines() -> list[str]:
    blocks = [b for page in PAGES for b in re.findall(r"```bash\n(.*?)```", page, flags=re.S)]
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def _vtc_commands() -> list[list[str]]:
    """Each ``vtc`` invocation of the shell blocks (after a pipe too), comments dropped."""
    found = []
    for line in _shell_lines():
        for part in line.split("|"):
            argv = shlex.split(part, comments=True)
            if argv and argv[0] == "vtc":
                found.append(argv[1:])
    return found


COMMANDS = _vtc_commands()


def test_the_readme_has_vtc_examples_to_check() -> None:
    assert len(COMMANDS) >= 15
    assert {a[0] for a in COMMANDS if a and not a[0].startswith("-")} >= set(RUNNABLE)


@pytest.mark.parametrize("argv", COMMANDS, ids=shlex.join)
def test_each_readme_command_parses_and_its_serve_line_and_preset_hold(argv: list[str]) -> None:
    own, serve = _split_serve_args(argv)
    args = _parser().parse_args(own)  # argparse exits (a test failure) on a bad example
    if serve:
        flags_from_argv(serve[1:] if serve[0] == "serve" else serve)
    preset = getattr(args, "preset", None)
    if preset is not None:
        _starts_on_its_gpu(preset)


def _starts_on_its_gpu(name: str) -> None:
    presets = {p.name: p for p in load_presets().presets}
    assert name in presets, f"the README names a preset that does not exist: {name}"
    chosen = presets[name]
    assert chosen.sim_gpu is not None, f"{name} names no GPU to check it on"
    hardware = SimHardware(resolve_gpu(chosen.sim_gpu), 1, 0)
    plan = plan_memory(resolve(chosen.flags, resolve_model(chosen.flags.model), hardware))
    assert plan.failure is None, f"the README's preset {name} fails: {plan.failure}"


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Seven console runs and three demo runs in a temp data dir; the cwd a temp dir with
    the server.log the README diagnoses."""
    data = tmp_path / "data"
    data.mkdir()
    for name, runs in (
        (
            "runs.sqlite",
            [failed_run(1, max_model_len=30576)]
            + [served_run(i, tput=700 + 40 * i, max_num_seqs=32 * i) for i in range(2, 8)]
            + [  # two trials of the shipped auto-tune spec's sweep (the pages filter on it)
                served_run(8 + i, max_num_seqs=128 * (i + 1)).model_copy(
                    update={"sweep": SweepTag(sweep_id="llama3b-auto-tune-0f3a9c", trial=i + 1)}
                )
                for i in range(2)
            ],
        ),
        ("demo-runs.sqlite", [served_run(i, tput=500 + i) for i in range(1, 4)]),
    ):
        store = RunStore(data / name)
        for run in runs:
            store.add(run.model_copy(update={"id": None, "label": ""}))
        store.close()
    work = tmp_path / "work"
    work.mkdir()
    log = (CAPTURES / "fail_a1_maxlen65536_kvbytes16M.log").read_text(encoding="utf-8")
    (work / "server.log").write_text(log, encoding="utf-8")
    monkeypatch.setenv("VTC_DATA_DIR", str(data))
    monkeypatch.chdir(work)
    with (work / "server.log").open(encoding="utf-8") as pasted:
        monkeypatch.setattr(sys, "stdin", pasted)  # `pbpaste | vtc diagnose -`
        yield work


RUNS_HERE = [a for a in COMMANDS if a and a[0] in RUNNABLE]


@pytest.mark.parametrize("argv", RUNS_HERE, ids=shlex.join)
def test_each_readme_command_that_needs_no_server_runs_as_written(
    argv: list[str], history: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == RUNNABLE[argv[0]], capsys.readouterr()
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if argv[0] == "stop":  # nothing was left running: it says so, in one line
        assert err.strip().count("\n") == 0 and "no server started by vtc" in err
    for flag in ("-o",):
        if flag in argv:
            assert (history / argv[argv.index(flag) + 1]).stat().st_size > 0


def test_the_readme_names_the_venv_and_the_python_the_project_needs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    minimum = project["requires-python"].removeprefix(">=")
    lines = _shell_lines()
    assert any(line.startswith("python3 -m venv ") for line in lines)
    assert f"Python {minimum} or newer" in README
