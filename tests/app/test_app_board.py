"""``vtc runs``, ``vtc export`` and ``vtc report`` headless, on a history in a temp dir."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from fakes.runs import failed_run, served_run

from tui.app.cli import main
from tui.domain.board.saved import SavedBoard
from tui.store.console_files import ConsoleFiles
from tui.store.history import RunStore


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VTC_DATA_DIR", str(tmp_path))
    return tmp_path


def _store(path: Path, runs: list) -> None:  # type: ignore[type-arg]
    store = RunStore(path)
    for run in runs:
        store.add(run.model_copy(update={"id": None, "label": ""}))
    store.close()


def test_empty_history_says_where_it_looked_and_that_demo_runs_live_apart(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _store(data_dir / "demo-runs.sqlite", [served_run(1), served_run(2)])
    assert main(["runs"]) == 0
    err = capsys.readouterr().err
    assert str(data_dir / "runs.sqlite") in err and str(data_dir / "demo-runs.sqlite") in err
    assert "(2 there)" in err and "`vtc runs --demo`" in err
    assert not (data_dir / "runs.sqlite").exists()  # looking does not create a history
    assert main(["export", "last", "--as", "command"]) == 2
    assert "demo runs are kept apart" in capsys.readouterr().err


def test_runs_prints_every_format(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _store(
        data_dir / "runs.sqlite",
        [
            failed_run(1, max_model_len=30576),
            served_run(2, max_num_seqs=256),
            served_run(3, tput=990, max_num_seqs=512),
        ],
    )
    assert main(["runs", "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert "| failed: kv_cache_too_small |" in md and "`max_num_seqs`" in md
    # Answers first: the run, its change, the verdict on it, the objective metrics; state later.
    header = next(line for line in md.splitlines() if line.startswith("| run |"))
    cells = [c.strip() for c in header.strip("|").split("|")]
    assert cells[:5] == ["run", "changed", "verdict", "out tok/s", "TTFT p99"]
    assert "state" in cells[5:]
    assert (
        main(["runs", "--format", "csv", "--show", "served", "--sort", "out tok/s", "--desc"]) == 0
    )
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["label"] for r in rows] == ["#3", "#2"]
    assert main(["runs", "--format", "json", "--baseline", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["baseline"]["label"] == "#3" and doc["baseline"]["reason"] == "pinned"
    assert main(["runs", "--where", "max_num_seqs=512"]) == 0
    assert "#3" in capsys.readouterr().out
    assert main(["runs", "--compare", "#2", "#3"]) == 0
    assert "| Metric | Before (#2) | After (#3) | Improvement |" in capsys.readouterr().out
    assert main(["runs", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["runs", "--sort", "nope"], "no column 'nope'"),
        (["runs", "--where", "max_num_seqs"], "expected NAME=VALUE"),
        (["runs", "--baseline", "#42"], "no run '#42'"),
        (["export", "9", "--as", "yaml"], "no run '9'"),
        (["runs", "--compare", "4", "5"], "no run '4'"),
        (["runs", "--sweep", "nosuch"], "no sweep with an id starting 'nosuch'"),
    ],
)
def test_bad_requests_are_one_line_and_exit_2(
    data_dir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    _store(data_dir / "runs.sqlite", [served_run(1)])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("vtc: ") and message in err and err.count("\n") == 1


def test_export_and_report_write_files(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _store(data_dir / "demo-runs.sqlite", [served_run(1), served_run(2, max_num_seqs=512)])
    out = data_dir / "run.yaml"
    assert main(["export", "#2", "--as", "yaml", "--demo", "-o", str(out)]) == 0
    assert "max-num-seqs: 512" in out.read_text() and "simulator" in out.read_text()
    assert main(["export", "last", "--as", "command", "--demo"]) == 0
    assert (
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs 512" in capsys.readouterr().out
    )
    page = data_dir / "board.html"
    assert main(["report", "--demo", "-o", str(page), "--latency", "e2el"]) == 0
    html = page.read_text()
    assert html.startswith("<!doctype html>") and "<svg" in html and "#2" in html
    assert main(["report", "--demo", "-o", str(data_dir / "missing" / "x.html")]) == 2
    assert "cannot write" in capsys.readouterr().err


@pytest.mark.parametrize(
    "named", [["--compare", "4", "5"], ["--baseline", "nosuch"], ["--sweep", "nosuch"]]
)
def test_a_named_run_or_sweep_on_an_empty_history_is_one_line_and_exit_2(
    data_dir: Path, capsys: pytest.CaptureFixture[str], named: list[str]
) -> None:
    assert main(["runs", "--demo", *named]) == 2  # printed "no runs" and exited 0
    err = capsys.readouterr().err
    assert err.startswith("vtc: no demo runs") and err.count("\n") == 1


def test_a_sweep_prefix_that_matches_lists_only_its_trials(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fakes.runs import PROBED_TRIAL

    trial = served_run(2).model_copy(update={"sweep": PROBED_TRIAL})
    _store(data_dir / "runs.sqlite", [served_run(1), trial])
    assert main(["runs", "--sweep", PROBED_TRIAL.sweep_id[:4], "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len(rows) == 1


def test_the_console_pin_is_every_surface_s_baseline(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _store(data_dir / "demo-runs.sqlite", [served_run(1), served_run(2), served_run(3)])
    assert main(["runs", "--demo", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["baseline"]["label"] == "#1" and doc["baseline"]["reason"] == "first load"
    # what the console writes when the operator pins #2 (its ConsoleFiles, the same file)
    ConsoleFiles(data_dir, history="demo-runs", demo=True).write_board(SavedBoard(pinned=2))
    assert main(["runs", "--demo", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["baseline"]["label"] == "#2" and doc["baseline"]["reason"] == "pinned"
    assert main(["runs", "--demo", "--format", "md"]) == 0
    assert "vs #2 (pinned)" in capsys.readouterr().out
    page = data_dir / "board.html"
    assert main(["report", "--demo", "-o", str(page)]) == 0
    assert "vs #2 (pinned)" in page.read_text()
    assert main(["runs", "--demo", "--format", "json", "--baseline", "3"]) == 0  # the flag wins
    assert json.loads(capsys.readouterr().out)["baseline"]["label"] == "#3"
    assert main(["runs", "--format", "json"]) == 0  # the console's own history: no pin there
    capsys.readouterr()
