"""The one argv lexer: what is an option, what is a value, what an option is called."""

from __future__ import annotations

import pytest

from tui.domain.flags.argv import (
    canonical_option,
    lex,
    looks_like_option,
    strip_program,
    take_values,
)


@pytest.mark.parametrize(
    ("token", "option"),
    [
        ("--max-model-len", True),
        ("--max_model_len=5", True),
        ("-tp", True),
        ("-O3", True),
        ("-1", False),
        ("-.5", False),
        ("-1.5", False),
        ("-", False),
        ("", False),
        ("m", False),
        ("--a b", False),
        ("--chat-template=a b", True),
        ("-1e5", True),  # argparse 3.11
    ],
)
def test_options_and_values_as_argparse_reads_them(token: str, option: bool) -> None:
    assert looks_like_option(token) is option


@pytest.mark.parametrize(
    ("token", "name"),
    [
        ("--max_model_len=5", "--max-model-len"),
        ("-O3", "--optimization-level"),
        ("-O=2", "--optimization-level"),
        ("-cc.mode", "-cc"),
        ("--compilation_config.pass_config.x=1", "--compilation-config"),
        ("--help=all", "--help"),
        ("-tp", "-tp"),
    ],
)
def test_canonical_names_follow_vllms_rewrites(token: str, name: str) -> None:
    assert canonical_option(token) == name


def test_lexing_a_command_line() -> None:
    tokens = lex(["m", "--seed=3", "-O", "3", "-O", "--x", "--", "--y"])
    assert [t.option for t in tokens] == [
        None,
        "--seed",
        "--optimization-level",
        None,
        "-O",
        "--x",
        None,
        None,
    ]
    assert tokens[1].inline == "3" and tokens[1].spelled == "--seed"


def test_values_are_taken_as_nargs_says() -> None:
    tokens = lex(["--api-key", "a", "b", "--x", "v", "-cc.mode", "-1", "--y=1"])
    assert take_values(tokens, 0, "+") == ["a", "b"]
    assert take_values(tokens, 0, None) == ["a"]
    assert take_values(tokens, 0, 0) == []
    assert take_values(tokens, 3, "?") == ["v"]
    assert take_values(tokens, 5, None) == ["-1"]  # a dotted key always takes the next token
    assert take_values(tokens, 7, "+") == ["1"]


def test_a_pasted_command_line_loses_its_program() -> None:
    assert strip_program(["/venv/bin/vllm", "serve", "m", "-tp", "2"]) == ["m", "-tp", "2"]
    assert strip_program(["m"]) == ["m"]
