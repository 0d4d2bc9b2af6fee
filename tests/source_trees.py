"""The product's source, parsed once per test process (architecture and size checks).

``tests/test_architecture.py`` and ``tests/test_code_size.py`` walk every module of ``tui``
in dozens of checks, many parametrized per module; each parsed the whole tree again (about
50 s of the suite's summed time). Keyed by the text itself, a cached tree is never stale: a
check that writes its own fixture module (``tmp_path``) parses that text afresh.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from radon.complexity import cc_visit


def source(path: Path) -> str:
    """``path``'s text (read each time: cheap, and never stale)."""
    return path.read_text(encoding="utf-8")


@cache
def _parsed(text: str, filename: str) -> ast.Module:
    return ast.parse(text, filename=filename)


def parsed(path: Path) -> ast.Module:
    """``path``'s syntax tree, parsed once per distinct text. Shared: never mutate it."""
    return _parsed(source(path), str(path))


@cache
def _blocks(text: str) -> tuple[object, ...]:
    return tuple(cc_visit(text))


def complexity_blocks(path: Path) -> tuple[object, ...]:
    """radon's blocks (functions, classes with their methods) of ``path``, counted once per
    distinct text."""
    return _blocks(source(path))
