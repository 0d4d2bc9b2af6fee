"""Every ``vtc`` subcommand explains itself: a line in ``vtc --help``, a description in
``vtc SUB --help``, and a help text for each of its options."""

from __future__ import annotations

import argparse

import pytest

from tui.app.cli import _parser


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = _parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_vtc_help_lists_each_subcommand_with_a_line() -> None:
    text = _parser().format_help()
    for name in _subcommands():
        line = next((ln for ln in text.splitlines() if ln.strip().startswith(name + " ")), "")
        assert len(line.split(maxsplit=1)) == 2, f"{name} has no line in vtc --help"


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_each_subcommand_has_a_description_and_every_option_a_help(name: str) -> None:
    sub = _subcommands()[name]
    assert sub.description, f"vtc {name} --help says nothing about what it does"
    silent = [a.option_strings or a.dest for a in sub._actions if not a.help]
    assert not silent, f"vtc {name}: options without help: {silent}"
