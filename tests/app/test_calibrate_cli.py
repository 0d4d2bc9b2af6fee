"""``vtc calibrate``'s command line: what it refuses in one line, what it prints."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.profiles import cpu_profile

from tui.app.calibrate import describe
from tui.app.cli import main


def test_calibrate_needs_a_url_or_a_serve_line_not_both(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--name", "x"]) == 2
    assert "needs a URL or a `-- serve MODEL [flags]` line" in capsys.readouterr().err
    assert main(["calibrate", "http://127.0.0.1:9", "--name", "x", "--", "serve", "m"]) == 2


def test_a_bad_profile_name_is_refused_before_anything_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VTC_DATA_DIR", str(tmp_path))
    assert main(["calibrate", "http://127.0.0.1:9", "--name", "../evil"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vtc: bad profile name") and len(err.strip().splitlines()) == 1


def test_a_saved_profile_is_described_with_its_coefficients_and_error(tmp_path: Path) -> None:
    lines = describe(cpu_profile(tmp_path / "m"))
    assert lines[0].startswith("profile tiny-cpu r1: ")
    assert "step time = 4.000 ms + 30.00 us/prefill token + 300.0 us/decode token" in lines[1]
    assert "us/1k KV tokens decode reads" in lines[1] and "prefill attention pairs" in lines[1]
    # A CPU server: the API server's work is on the engine's cores, and it says so.
    assert lines[2].startswith("  API server: 3.00 ms/request") and "engine's cores" in lines[2]
    assert "KV 131,072 tokens, block 128" in lines[3]
    assert "fit error (calibration loads, in-sample): median 2.0%, worst 6.0%" in lines[4]
    # The validation error, named as such, with the interval a prediction states.
    assert lines[5].startswith("  validation error (loads left out of the fit): ±5.0% covers 80%")
    assert "(median 3.0%, worst 12.0%)" in lines[5]
