"""The simulator stays within the codebase's size limits (functions <= 120 lines, classes <=
350); cyclomatic complexity (<= 20) is ruff's C901 in CI."""

from __future__ import annotations

import ast
from pathlib import Path

SIM = Path(__file__).resolve().parents[2] / "tui" / "sim"


def _oversized() -> list[str]:
    found = []
    for path in sorted(SIM.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            limit = None
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                limit = 120
            elif isinstance(node, ast.ClassDef):
                limit = 350
            if limit is not None and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.name}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_functions_and_classes_are_within_the_limits() -> None:
    assert SIM.is_dir() and len(list(SIM.glob("*.py"))) > 10
    assert _oversized() == []
