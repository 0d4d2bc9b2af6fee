"""Architecture invariants: the UI boundary and the direction of dependencies."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tui"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _modules_outside(room: str) -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if room not in p.relative_to(PACKAGE).parts[:1]]


def test_package_is_found() -> None:
    assert (PACKAGE / "ui").is_dir()
    assert len(_modules_outside("ui")) > 10


@pytest.mark.parametrize("path", _modules_outside("ui"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_nothing_outside_ui_imports_textual(path: Path) -> None:
    offenders = {m for m in _imports(path) if m == "textual" or m.startswith("textual.")}
    assert not offenders, f"{path} imports {offenders}; only tui/ui may import textual"


@pytest.mark.parametrize("path", sorted((PACKAGE / "domain").rglob("*.py")), ids=lambda p: p.name)
def test_domain_imports_no_services_or_io(path: Path) -> None:
    forbidden_prefixes = ("tui.server", "tui.telemetry", "tui.load", "tui.sim", "tui.store",
                          "tui.ui", "tui.session", "tui.cli", "httpx", "aiohttp", "psutil",
                          "pynvml", "sqlite3", "subprocess", "socket")  # fmt: skip
    bad = {m for m in _imports(path) if m.startswith(forbidden_prefixes)}
    assert not bad, f"domain module {path.name} imports {bad}"


def test_textual_boundary_check_catches_a_violation(tmp_path: Path) -> None:
    # The check above must be able to fail: feed it a module that does import textual.
    bad = tmp_path / "bad.py"
    bad.write_text("from textual.app import App\n")
    assert "textual.app" in _imports(bad)
