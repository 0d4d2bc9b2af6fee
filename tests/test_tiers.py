"""The tiers partition the suite: every test is in exactly one, plain ``pytest`` runs the fast
one, and ``.ci/run`` runs every tier (so no test is run by no stage, none by two).

Selection is pytest's own ``-m``: a throwaway suite holding one test per combination of the
tier markers is collected with each tier's expression (pytest in-process, as pytester does,
without the installed plugins). .ci/run's last stage also checks the real suite: every test
``pytest --collect-only -m ''`` lists ran in exactly one stage (tools/test_durations.py)."""

from __future__ import annotations

import importlib.util
import itertools
import re
import shlex
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from suite_tiers import REALVLLM_LANES, TIER_MARKERS, TIERS, TIMED

ROOT = Path(__file__).resolve().parent.parent


def _combos(markers: tuple[str, ...]) -> list[tuple[str, ...]]:
    return [combo for n in range(len(markers) + 1) for combo in itertools.combinations(markers, n)]


COMBOS = _combos(TIER_MARKERS)


def _name(combo: tuple[str, ...]) -> str:
    return "test_" + ("_".join(combo) or "plain")


class _Selected:
    """A plugin that keeps the names of the tests a run selected."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.names = {item.name for item in session.items}


def _selected(suite: Path, expression: str) -> set[str]:
    plugin = _Selected()
    args = [str(suite), "--collect-only", "-q", "-c", str(suite / "pytest.ini")]
    args += ["--rootdir", str(suite), "-p", "no:cacheprovider"]
    code = pytest.main([*args, "-m", expression], plugins=[plugin])
    assert code in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED), code
    return plugin.names


def _combos_suite(directory: Path, markers: tuple[str, ...]) -> Path:
    """One test per combination of ``markers``, registered as pyproject (or conftest) does."""
    lines = ["import pytest", ""]
    for combo in _combos(markers):
        lines += [f"@pytest.mark.{marker}" for marker in combo]
        lines += [f"def {_name(combo)}():", "    pass", ""]
    # a module name of its own per suite: pytest in-process imports each once
    (directory / f"test_combos_{len(markers)}.py").write_text("\n".join(lines))
    declared = "".join(f"\n    {marker}: a tier" for marker in markers)
    (directory / "pytest.ini").write_text(f"[pytest]\nmarkers ={declared}\n")
    return directory


@pytest.fixture
def plain_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest's own ``-m``: CI's options (--junitxml) and the installed plugins left out."""
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


@pytest.fixture
def combos_suite(tmp_path: Path, plain_pytest: None) -> Path:
    """One test per combination of the tier markers."""
    return _combos_suite(tmp_path, TIER_MARKERS)


def test_every_combination_of_markers_is_in_exactly_one_tier(combos_suite: Path) -> None:
    chosen = {tier: _selected(combos_suite, expression) for tier, expression in TIERS.items()}
    everything = _selected(combos_suite, "")
    assert everything == {_name(combo) for combo in COMBOS}
    for name in everything:
        tiers = [tier for tier, names in chosen.items() if name in names]
        assert len(tiers) == 1, f"{name} is in {tiers or 'no tier'}"
    assert chosen["fast"] == {_name(())}
    assert _name(("slow",)) in chosen["slow"] and _name(("ray",)) in chosen["ray"]


def test_the_real_vllm_lanes_partition_its_tier(tmp_path: Path, plain_pytest: None) -> None:
    """Every test of the real-vLLM tier is in exactly one of its lanes, whatever else it is
    marked with, and the timed lane holds exactly the timed ones."""
    suite = _combos_suite(tmp_path, (*TIER_MARKERS, TIMED))
    tier = _selected(suite, TIERS["realvllm"])
    lanes = {lane: _selected(suite, expression) for lane, expression in REALVLLM_LANES.items()}
    assert tier and all(lanes.values())
    for name in tier:
        assert sum(name in names for names in lanes.values()) == 1, name
    assert set().union(*lanes.values()) == tier
    timed = {name for name in tier if TIMED in name.split("_")}
    assert timed in lanes.values() and timed != tier


def _addopts() -> list[str]:
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    return shlex.split(ini["addopts"])


def test_plain_pytest_runs_the_fast_tier() -> None:
    opts = _addopts()
    assert opts[opts.index("-m") + 1] == TIERS["fast"]
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    declared = {line.split(":")[0] for line in markers["ini_options"]["markers"]}
    assert set(TIER_MARKERS) <= declared


def test_ci_runs_every_tier() -> None:
    """Each tier other than the README's (plain ``pytest``) is a stage's ``-m`` in .ci/run; the
    real-vLLM tier is two, one per lane."""
    ci = (ROOT / ".ci" / "run").read_text()
    expressions = set()
    for line in ci.splitlines():
        if re.match(r"\s*(\S+=\S+\s+)*pytest\b", line) and "--collect-only" not in line:
            words = shlex.split(line)
            if "-m" in words:
                expressions.add(words[words.index("-m") + 1])
    for tier in ("slow", "ray"):
        assert TIERS[tier] in expressions, f"no .ci/run stage runs the {tier} tier"
    for lane, expression in REALVLLM_LANES.items():  # the real-vLLM tier, lane by lane
        assert expression in expressions, f"no .ci/run stage runs the lane {lane}"
    readme = ROOT / "README.md"
    assert "pip install -e '.[test]' && pytest\n" in readme.read_text()
    assert "pip install -q -e '.[test]' && pytest" in ci


def _durations_tool() -> ModuleType:
    """tools/test_durations.py, imported from its file (tools/ is no package)."""

    spec = importlib.util.spec_from_file_location(
        "test_durations_tool", ROOT / "tools" / "test_durations.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_partition_check_reads_a_skipped_module_as_no_test(tmp_path: Path) -> None:
    """The README's stage runs without the ray extra: each Ray module is skipped while
    collected, and pytest's JUnit XML writes that as a case named for the module. CI's tiers
    check must not count it as a test run by that stage (CI failed on exactly this), while a
    test that no stage ran is still a problem."""
    tool = _durations_tool()
    readme = tmp_path / "readme.xml"
    readme.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="" name="tests.tune.test_ray_local">'
        '<skipped message="collection skipped">no ray</skipped></testcase>'
        '<testcase classname="tests.test_a" name="test_one" time="0.1"/>'
        "</testsuite></testsuites>"
    )
    ray = tmp_path / "ray.xml"
    ray.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.tune.test_ray_local" name="test_sweep" time="3"/>'
        "</testsuite></testsuites>"
    )
    collected = tmp_path / "collected.txt"
    collected.write_text("tests/test_a.py::test_one\ntests/tune/test_ray_local.py::test_sweep\n")
    stages = [f"README={readme}", f"ray={ray}"]
    assert tool.check_partition(collected, stages) == []
    collected.write_text(collected.read_text() + "tests/test_a.py::test_two\n")
    assert tool.check_partition(collected, stages) == ["tests/test_a.py::test_two: run by no stage"]
