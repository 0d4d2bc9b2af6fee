"""What vtc ships to a cluster's nodes covers what a trial imports there, and no more.

A node has Ray (``ray[default]``); the rest of what the node's side of a trial imports (the
worker, the simulator, the load and log relay processes) must come from the packages the
head ships (vtc's dependencies less the head-only ones, pinned to the head's versions) or
what those require. Checked by importing those modules in a fresh interpreter and naming
the distribution of every module that came in.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ray  # the ray extra: run in CI's Ray stage, where it is installed
pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")

from packaging.requirements import Requirement  # noqa: E402
from packaging.utils import canonicalize_name  # noqa: E402

from tui.modes.ray_ship import HEAD_ONLY, WORKER_MODULES, worker_requirements  # noqa: E402

OPTIONAL = {"rich", "pygments", "colorama", "markdown-it-py", "mdurl"}
"""Imported here only because the console's packages brought them: httpx loads its command
line (rich, click's colors) when they are installed and does without them otherwise."""

PROBE = """
import importlib, importlib.metadata as md, json, sys
before = set(sys.modules)
for name in sys.argv[1:]:
    importlib.import_module(name)
found = md.packages_distributions()
tops = {m.split(".")[0] for m in set(sys.modules) - before}
print(json.dumps(sorted({d for t in tops if t not in sys.stdlib_module_names
                         for d in found.get(t, [])})))
"""


def _closure(roots: list[Requirement]) -> set[str]:
    """Every distribution ``roots`` bring, their requirements' requirements included."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(req.name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for line in requires:
            sub = Requirement(line)
            extras = req.extras or {""}
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in extras):
                todo.append(sub)
    return seen


def test_the_shipped_packages_are_vtcs_own_pinned_to_the_heads_versions() -> None:
    pinned = worker_requirements()
    names = {canonicalize_name(Requirement(p).name) for p in pinned}
    assert not names & HEAD_ONLY and {"httpx", "pydantic", "numpy"} <= names
    for line in pinned:
        req = Requirement(line)
        assert str(req.specifier) == f"=={importlib.metadata.version(req.name)}"


def test_what_a_trial_imports_on_a_node_comes_from_ray_or_the_shipped_packages() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *WORKER_MODULES],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    imported = {canonicalize_name(d) for d in json.loads(done.stdout)} - {"vtc"}
    roots = [Requirement(p) for p in worker_requirements()] + [Requirement("ray[default]")]
    missing = imported - _closure(roots) - OPTIONAL
    assert not missing, f"a trial imports {sorted(missing)} on its node: neither Ray nor shipped"
    assert not imported & HEAD_ONLY  # the console and the optimizer stay on the head


def test_packages_are_shipped_only_where_a_node_lacks_them_and_a_node_that_cannot_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tui.modes import ray_ship
    from tui.modes.options import SetupError

    asked: list[dict[str, object]] = []
    nodes = {"a1b2c3d4": 1.0}

    def everyone_has_them(_: object, env: dict[str, object], __: float) -> dict[str, str]:
        asked.append(env)
        return {}

    monkeypatch.setattr(ray_ship, "failures", everyone_has_them)
    assert ray_shipped(nodes) == {} and asked == [{}]  # the code alone: nothing installed

    def none_can(_: object, env: dict[str, object], __: float) -> dict[str, str]:
        asked.append(env)
        return {"a1b2c3d4": "No matching distribution found for numpy==2.4.6"}

    asked.clear()
    monkeypatch.setattr(ray_ship, "failures", none_can)
    with pytest.raises(SetupError) as refused:
        ray_shipped(nodes)
    assert [list(env) for env in asked] == [[], ["pip"]]  # tried alone, then with packages
    line = refused.value.one_line()
    assert "node a1b2c3 cannot run vtc's trials" in line and "numpy==2.4.6" in line


def ray_shipped(nodes: dict[str, float]) -> dict[str, object]:
    from tui.modes.ray_ship import shipped_env

    return shipped_env(nodes, deadline_s=1.0)
