"""One Credentials object, one precedence, for every consumer."""

from __future__ import annotations

from tui.domain.credentials import Credentials


def test_the_serve_line_beats_vllm_api_key_which_beats_openai_api_key() -> None:
    env = {"VLLM_API_KEY": "vllm-key-1", "OPENAI_API_KEY": "openai-key-2"}
    assert Credentials.from_env({"OPENAI_API_KEY": "openai-key-2"}).api_key == "openai-key-2"
    assert Credentials.from_env(env).api_key == "vllm-key-1"
    given = Credentials.from_env(env, command_line={"VLLM_API_KEY": "line-key-3"})
    assert given.api_key == "line-key-3" and "command line" in given.api_key_source
    # The launched server requires the same key the console's clients send.
    assert given.server_env() == {"VLLM_API_KEY": "line-key-3"}
    assert given.headers() == {"Authorization": "Bearer line-key-3"}


def test_a_token_from_the_command_line_is_handed_to_the_server_and_never_shown() -> None:
    inherited = Credentials.from_env({"HF_TOKEN": "hf_inherited"})
    assert inherited.server_env() == {}  # the server inherits it like any variable
    given = Credentials.from_env({"HF_TOKEN": "hf_inherited"}, command_line={"HF_TOKEN": "hf_x"})
    assert given.hf_token == "hf_x" and given.server_env() == {"HF_TOKEN": "hf_x"}
    shown = repr(given)
    assert "hf_x" not in shown and "hf_inherited" not in shown
    assert Credentials().server_env() == {} and Credentials().headers() == {}
