"""``vtc capacity`` headless: the JSON scripts rely on, the text plot, one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.profiles import cpu_profile

from tui.app.cli import main
from tui.domain.capacity import LOAD_SECONDS
from tui.store.capacity_answers import recent_answers
from tui.store.profiles import save_profile

QUICK = ["--input-len", "128", "--output-len", "32", "--num-prompts", "60"]


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "data"
    monkeypatch.setenv("VTC_DATA_DIR", str(folder))
    save_profile(cpu_profile(tmp_path / "model"), folder)
    return folder


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("vtc") and "\n" not in err, err
    return err


def test_the_json_holds_the_rate_its_interval_the_curve_and_the_replicas(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["capacity", "--profile", "tiny-cpu", "--slo", "p99_ttft_ms=40", *QUICK]
    code = main([*argv, "--target-rate", "200", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    low, high = data["interval"]
    assert 0 < low <= data["max_rate"] <= high
    assert data["replicas"]["needed"] >= 1
    assert data["replicas"]["low"] <= data["replicas"]["needed"] <= data["replicas"]["high"]
    assert all(set(p) == {"rate", "p99_ttft_ms"} for p in data["curve"])
    assert len(data["curve"]) >= 4
    assert data["label"].startswith("predicted (twin tiny-cpu r1")
    assert "confirmed_rate" not in data and "real_loads" not in data
    assert recent_answers(data_dir)[0].max_rate == data["max_rate"]  # kept for the report


def test_the_text_answer_draws_the_curve_at_the_terminal_width_inert(
    data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "72")
    argv = ["capacity", "--profile", "tiny-cpu", "--slo", "p99_ttft_ms=40,p99_e2el_ms=900"]
    assert main([*argv, *QUICK]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    lines = out.splitlines()
    assert lines[0].startswith("predicted (twin tiny-cpu r1")
    assert lines[1].startswith("max ") and "req/s" in lines[1]
    assert "offered rate (req/s)" in out and "% of SLO" in out
    assert max(len(line) for line in lines[3:-1]) <= 72


def test_without_a_profile_it_says_so_and_offers_calibration(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["capacity", "--profile", "nope", "--slo", "p99_ttft_ms=500"]) == 2
    err = _one_line_error(capsys)
    assert "vtc calibrate" in err and "k in the console" in err
    argv = ["capacity", "--slo", "p99_ttft_ms=500", "--", "serve", "other/model"]
    assert main(argv) == 2
    err = _one_line_error(capsys)
    assert "no profile of this server (other/model)" in err and "vtc calibrate" in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--slo", "p99_ttft=500"], "unknown SLO"),
        (["--slo", "p99_ttft_ms=fast"], "not a number"),
        (["--slo", "p90_itl_ms=50"], "does not predict p90_itl_ms"),
        (["--slo", "p99_ttft_ms=500", "--request-rate-shape", "bursty"], "poisson or burstiness"),
        (["--slo", "p99_ttft_ms=500", "--confirm"], "--confirm needs the server's URL"),
        (["--slo", "p99_ttft_ms=500", "--num-prompts", "0"], "num_prompts"),
        (["--slo", "p99_ttft_ms=500", "--load-seconds", "0"], "finite number above 0"),
    ],
)
def test_bad_input_is_one_line(
    data_dir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    try:
        code = main(["capacity", "--profile", "tiny-cpu", *argv])
    except SystemExit as exc:  # refused by the parser
        code = int(exc.code or 0)
    assert code == 2
    assert said in _one_line_error(capsys)


def test_each_load_is_bounded_in_time_by_default_and_says_so(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["capacity", "--profile", "tiny-cpu", "--slo", "p99_ttft_ms=40", *QUICK]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["load_seconds"] == LOAD_SECONDS
    assert main([*argv, "--json", "--load-seconds", "30"]) == 0
    assert json.loads(capsys.readouterr().out)["load_seconds"] == 30.0
    assert main([*argv, "--load-seconds", "30"]) == 0
    assert "rate x 30 s requests per load (20-60)" in capsys.readouterr().out


def test_a_burstiness_shape_is_the_workload_s(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["capacity", "--profile", "tiny-cpu", "--slo", "p99_ttft_ms=40", *QUICK]
    assert main([*argv, "--request-rate-shape", "burstiness=0.5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["workload"]["burstiness"] == 0.5


def test_without_a_name_the_newest_profile_of_the_served_model_answers(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = str(tmp_path / "model")  # the model the saved profile was fitted on
    argv = ["capacity", "--slo", "p99_ttft_ms=40", *QUICK, "--json", "--", "serve", model]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["label"].startswith("predicted (twin tiny-cpu r1") and data["model"] == model
