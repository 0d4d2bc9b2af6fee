"""Every headless command ends quietly into a pipe that closes early (``| head``): no
traceback, the shell's SIGPIPE status (141), whatever the command was printing."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakes.runs import failed_run, served_run

from tui.app.broken_pipe import EXIT_BROKEN_PIPE
from tui.cli import main
from tui.store.history import RunStore

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def _history(data_dir: Path, count: int) -> None:
    store = RunStore(data_dir / "runs.sqlite")
    for i in range(count):
        run = served_run(i + 1, max_num_seqs=8 * (i + 1)) if i % 5 else failed_run(i + 1)
        store.add(run.model_copy(update={"id": None, "label": ""}))
    store.close()


def test_runs_json_into_head_ends_quietly_with_the_sigpipe_status(tmp_path: Path) -> None:
    _history(tmp_path, 120)  # far more JSON than a pipe holds: the writer meets the close
    env = {**os.environ, "VTC_DATA_DIR": str(tmp_path), "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "runs", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    head = proc.stdout.read(200)  # `| head -c 200`, then the reader goes away
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == EXIT_BROKEN_PIPE, err
    assert head.startswith(b"[") and "Traceback" not in err and "BrokenPipe" not in err, err


class ClosedPipe(io.StringIO):
    """Standard output whose reader went away after ``keep`` characters."""

    def __init__(self, keep: int = 10) -> None:
        super().__init__()
        self.keep = keep

    def write(self, text: str) -> int:
        if self.tell() + len(text) > self.keep:
            raise BrokenPipeError(32, "Broken pipe")
        return super().write(text)


@pytest.mark.parametrize(
    "argv",
    [
        ["runs"],
        ["runs", "--json"],
        ["runs", "--format", "csv"],
        ["export", "last", "--as", "command"],
        ["presets"],
        ["diagnose", str(CAPTURES / "fail_a1_maxlen65536_kvbytes16M.log")],
    ],
    ids=lambda argv: " ".join(Path(word).name for word in argv),  # no checkout path in an id
)
def test_each_headless_command_meets_a_closed_pipe_quietly(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _history(tmp_path, 6)
    monkeypatch.setenv("VTC_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert main(argv) == EXIT_BROKEN_PIPE


def test_vtc_sim_help_into_a_closed_pipe_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from tui.app.sim import main as sim_main

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    with pytest.raises(SystemExit) as ended:
        sim_main(["gpus"])
    assert ended.value.code == EXIT_BROKEN_PIPE
