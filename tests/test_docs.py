"""What the README and docs/ show stays true: the screenshots are what the console renders
now, every `vtc` command in their code blocks parses, and no in-house reference reaches a
reader.

The screenshots are regenerated here exactly as ``python tools/screenshots.py`` writes them
(the demo's simulator on its virtual clock, the console's clock frozen), so the comparison
is of bytes, never of timings.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import re
import shlex
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tui.app import cli

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def _screenshots() -> ModuleType:
    spec = importlib.util.spec_from_file_location("screenshots", ROOT / "tools" / "screenshots.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def shown_commands(text: str) -> list[str]:
    """Every ``vtc ...`` command in the text's bash code blocks (a line may chain several
    with ``&&`` or pipe into one; comments dropped)."""
    found = []
    for lang, body in FENCE.findall(text):
        if lang not in ("bash", "sh", "console"):
            continue
        for line in body.splitlines():
            code = line.split(" #", 1)[0].strip()
            for part in re.split(r"&&|\|", code):
                words = shlex.split(part)
                if words and words[0] == "vtc":
                    found.append(part.strip())
    return found


def parses(command: str) -> str | None:
    """``None`` when ``vtc``'s parser accepts the command; else what it said."""
    own, _serve = cli._split_serve_args(shlex.split(command)[1:])
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            cli._parser().parse_args(own)
    except SystemExit as exc:
        return f"exit {exc.code}: {err.getvalue().strip()}"
    return None


COMMANDS = sorted(
    {(p.relative_to(ROOT).as_posix(), c) for p in PAGES for c in shown_commands(p.read_text())}
)


def test_pages_show_commands() -> None:
    assert len(COMMANDS) > 20
    readme = [c for page, c in COMMANDS if page == "README.md"]
    assert "vtc --demo" in readme


@pytest.mark.parametrize(("page", "command"), COMMANDS, ids=[f"{p}: {c}" for p, c in COMMANDS])
def test_shown_command_parses(page: str, command: str) -> None:
    assert parses(command) is None, f"{page} shows `{command}`: {parses(command)}"


def _subcommands() -> list[str]:
    parser = cli._parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(actions[0].choices)


def test_each_shown_subcommand_has_help() -> None:
    shown = {shlex.split(c)[1] for _, c in COMMANDS if len(shlex.split(c)) > 1}
    for name in sorted(shown & set(_subcommands())):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
            cli._parser().parse_args([name, "--help"])
        assert done.value.code == 0 and f"usage: vtc {name}" in out.getvalue()


def test_the_check_catches_a_flag_that_does_not_exist() -> None:
    assert parses("vtc runs --format md") is None
    assert "unrecognized arguments: --no-such-flag" in (parses("vtc runs --no-such-flag") or "")
    assert "invalid choice" in (parses("vtc runs --format docx") or "")


IN_HOUSE = re.compile(
    r"\b[Ii]ssue \d+|\b[Ss]eeds?[ /-]?\d{3}\b|seed's|\bi\d{2}\b|\bstop \d{2}\b|reference section"
)


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_in_house_reference(path: Path) -> None:
    hits = [line for line in path.read_text().splitlines() if IN_HOUSE.search(line)]
    assert not hits, hits


def test_every_page_is_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    for page in PAGES[1:]:
        assert f"](docs/{page.name}" in readme, page.name


def test_every_relative_link_resolves() -> None:
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            if not (page.parent / target).exists():
                broken.append(f"{page.name}: {target}")
    assert not broken


@pytest.mark.slow  # every scene rendered again: `pytest -m slow tests/test_docs.py`
def test_screenshots_are_current(tmp_path: Path) -> None:
    """A committed screenshot that differs from what the console renders now is stale:
    ``python tools/screenshots.py`` rewrites it."""
    shots = _screenshots()
    assert shots.SCENES
    stale = shots.stale()
    assert not stale, f"stale: {stale}; run `python tools/screenshots.py` and look at them"
