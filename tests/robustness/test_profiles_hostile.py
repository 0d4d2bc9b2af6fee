"""Twin profiles from outside (issue 33): every bad file is one line naming it, a bad one
never hides the good ones (`vtc-sim gpus`), implausible sizes and another vLLM's profile
are refused; `vtc sweep --demo` uses a named profile or refuses a missing one; numeric
sweep options are checked in every mode (`--ray-gpus -3` without `--ray`)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from fakes.profiles import cpu_profile

from tui.app.cli import main
from tui.modes.options import ConsoleOptions
from tui.modes.sweep import SweepMode
from tui.sim.cli import run as sim_run
from tui.store.profiles import profiles_dir, save_profile
from tui.tune.spec_file import load_spec

SPEC = Path(__file__).resolve().parents[2] / "presets/sweeps/rtx3080-8b-fp8-exploration.toml"


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict]:
    folder = tmp_path / "data"
    monkeypatch.setenv("VTC_DATA_DIR", str(folder))
    profile = save_profile(cpu_profile(tmp_path / "model"), folder)
    return folder, json.loads(profile.model_dump_json())


def _bad_profiles(folder: Path, good: dict) -> dict[str, str]:
    """Write one hostile profile per class; name -> what its one line must say."""
    where = profiles_dir(folder)
    (where / "deep.json").write_text("[" * 200_000)
    (where / "latin.json").write_bytes(b'{"name": "\xff"}')
    inf = json.dumps({**good, "coefficients": {**good["coefficients"], "b0": 0.5}})
    (where / "inf.json").write_text(inf.replace('"b0": 0.5', '"b0": Infinity'))
    big = {**good, "memory": {**good["memory"], "kv_tokens": 10**15}}
    (where / "bigkv.json").write_text(json.dumps(big))
    older = {**good, "name": "older", "identity": {**good["identity"], "vllm_version": "0.29.1"}}
    (where / "older.json").write_text(json.dumps(older))
    return {
        "deep": "nested 200000 levels deep",
        "latin": "not UTF-8 text (byte 10)",
        "inf": "Infinity is not a JSON number",
        "bigkv": "memory.kv_tokens 1,000,000,000,000,000",
        "older": "was fitted on vLLM 0.29.1; the simulator speaks 0.32.0, 0.33.0",
    }


def test_gpus_lists_the_good_profile_beside_each_bad_one_named(data: tuple[Path, dict]) -> None:
    folder, good = data
    expected = _bad_profiles(folder, good)
    out = io.StringIO()
    assert sim_run(["gpus"], out=out, err=io.StringIO(), install_signals=False) == 0
    listing = out.getvalue()
    assert "  tiny-cpu r1  " in listing
    for name in ("deep", "latin", "inf", "bigkv"):
        line = next(x for x in listing.splitlines() if x.startswith(f"  {name}  "))
        assert "not usable" in line and expected[name] in line


def test_serve_refuses_each_bad_profile_with_one_line(
    data: tuple[Path, dict], tmp_path: Path
) -> None:
    folder, good = data
    for name, said in _bad_profiles(folder, good).items():
        err = io.StringIO()
        argv = ["serve", str(tmp_path / "model"), "--sim-profile", name]
        assert sim_run(argv, out=io.StringIO(), err=err, install_signals=False) == 2, name
        lines = err.getvalue().strip().splitlines()
        assert said in lines[-1] and "Traceback" not in err.getvalue(), name


def test_demo_refuses_a_bad_profile_with_one_line(
    data: tuple[Path, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, good = data
    _bad_profiles(folder, good)
    assert main(["--demo", "--sim-profile", "deep"]) == 2
    err = capsys.readouterr().err.strip()
    assert "nested 200000 levels deep" in err and len(err.splitlines()) == 1


def _twin_spec(tmp_path: Path, profile: str) -> Path:
    text = SPEC.read_text().replace('strategy = "search"', 'strategy = "twin"')
    spec = tmp_path / "twin.toml"
    spec.write_text(text + f'\n[twin]\nprofile = "{profile}"\n')
    return spec


def test_sweep_demo_refuses_a_twin_profile_that_does_not_exist(
    data: tuple[Path, dict], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _twin_spec(tmp_path, "nope")
    assert main(["sweep", str(spec), "--demo", "--max-starts", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vtc: no profile named 'nope'") and len(err.splitlines()) == 1


def test_sweep_demo_runs_the_named_twin_profile(data: tuple[Path, dict], tmp_path: Path) -> None:

    folder, _ = data
    spec = load_spec(_twin_spec(tmp_path, "tiny-cpu"))
    twin = SweepMode(spec).twin(ConsoleOptions(demo=True, data_dir=folder))
    assert twin is not None and "tiny-cpu" in str(twin.label)  # the named one, not the catalogue's


@pytest.mark.parametrize(
    "option",
    [
        ["--ray-gpus", "-3"],
        ["--ray-gpus", "0"],
        ["--sim-gpus", "0"],
        ["--sim-speed", "nan"],
        ["--sim-speed", "-1"],
        ["--startup-timeout", "inf"],
        ["--max-starts", "-2"],
    ],
)
def test_sweep_options_are_checked_without_the_mode_that_uses_them(
    option: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["sweep", str(SPEC), "--demo", *option])
    assert caught.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument {option[0]}: must be a " in last and option[1] in last
