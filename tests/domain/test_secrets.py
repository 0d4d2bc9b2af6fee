"""Secrets on a serve command line: found in any spelling, moved to vLLM's environment."""

from __future__ import annotations

import pytest

from tui.domain.flags.problems import FlagError
from tui.domain.flags.secrets import find_secrets, split_secrets
from tui.domain.flags.serve import ServeFlags

KEY = "sk-very-secret-123"


@pytest.mark.parametrize(
    "argv",
    [
        ["m", "--api-key", KEY, "--seed", "1"],
        ["m", f"--api-key={KEY}", "--seed", "1"],
        ["m", "--api_key", KEY, "--seed", "1"],
        ["m", "--api-k", KEY, "--seed", "1"],  # an abbreviation argparse accepts
    ],
)
def test_the_api_key_moves_into_vllm_api_key(argv: list[str]) -> None:
    split = split_secrets(argv)
    assert split.argv == ("m", "--seed", "1")
    assert split.env == {"VLLM_API_KEY": KEY}
    assert all(KEY not in note for note in split.notes)


def test_a_hugging_face_token_moves_and_a_bare_flag_stays() -> None:
    split = split_secrets(["m", "--hf-token", "hf_abc", "--enforce-eager"])
    assert split.env == {"HF_TOKEN": "hf_abc"} and split.argv == ("m", "--enforce-eager")
    bare = split_secrets(["m", "--hf-token", "--enforce-eager"])
    assert bare.env == {} and bare.argv == ("m", "--hf-token", "--enforce-eager")


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["m", "--api-key", "a", "b"], "2 keys, but VLLM_API_KEY holds one"),
        (["m", "--api-key"], "expected at least one argument"),
        (["m", "--watermark-config", '{"key": 42}'], "reads it only from the command line"),
    ],
)
def test_secrets_vllm_cannot_take_from_the_environment_are_refused(
    argv: list[str], fragment: str
) -> None:
    with pytest.raises(FlagError, match=fragment) as err:
        split_secrets(argv)
    assert "42" not in str(err.value) and "\n" not in str(err.value)


def test_serve_flags_refuse_a_secret_in_extra_args_without_repeating_it() -> None:
    with pytest.raises(Exception) as err:
        ServeFlags(model="m", extra_args=("--api-key", KEY))
    assert KEY not in str(err.value)
    assert "VLLM_API_KEY" in str(err.value)


def test_secrets_are_found_with_their_span() -> None:
    (hit,) = find_secrets(["m", "--seed", "1", "--api-key", KEY])
    assert (hit.option, hit.start, hit.end, hit.values) == ("--api-key", 3, 5, (KEY,))
    assert hit.shown == "--api-key ***"
