"""No secret value in any export, the board or the report, whatever the secret is."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from fakes.runs import served_run
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from property_profiles import examples

from tui.domain.board.render import board_csv, board_json, board_markdown, board_text
from tui.domain.board.view import build_board
from tui.domain.export import EXPORT_FORMATS, export_run
from tui.domain.results import Reproduction, RunRecord
from tui.server.repro import capture_reproduction
from tui.store.report import report_html

# printable, no whitespace (a secret in an env file or header), long enough to be one
secrets = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FF, exclude_characters="\x7f"),
    min_size=8,
    max_size=40,
)


def _everything(runs: list[RunRecord]) -> str:
    board = build_board(runs)
    texts = [export_run(run, fmt).text for run in runs for fmt in EXPORT_FORMATS]
    texts += [board_text(board), board_markdown(board), board_csv(board)]
    texts.append(json.dumps(board_json(board), ensure_ascii=False))
    texts.append(report_html(board, generated=datetime(2026, 1, 1, tzinfo=UTC), source="h"))
    return "\n".join(texts)


def _runs(api_key: str, hf_token: str, password: str) -> list[RunRecord]:
    captured = capture_reproduction(
        ["vllm", "serve", "m", "--api-key", api_key, f"--hf-token={hf_token}"],
        launch_env={"VLLM_API_KEY": api_key, "DB_PASSWORD": password},
        inherited_env={"HF_TOKEN": hf_token, "VLLM_LOGGING_LEVEL": "INFO"},
        vllm_version="0.32.0",
    )
    # a record that holds the secrets where vtc never puts them: extra args, and an older
    # record whose reproduction stored a secret's value
    # (ServeFlags refuses a secret in extra args now: an older record held one unchecked)
    leaky = served_run(
        2,
        repro=Reproduction(
            env={"VLLM_API_KEY": api_key, "HF_TOKEN": hf_token, "DB_PASSWORD": password}
        ),
    )
    old = leaky.flags.model_copy(
        update={"extra_args": ("--api-key", api_key, "--enable-log-requests")}
    )
    leaky = leaky.model_copy(update={"flags": old})
    return [served_run(1, repro=captured), leaky, served_run(3, max_num_seqs=512)]


@settings(max_examples=examples(25), deadline=None)
@given(api_key=secrets, hf_token=secrets, password=secrets)
def test_no_secret_value_anywhere(api_key: str, hf_token: str, password: str) -> None:
    clean = _everything(_runs("PLACEHOLDER-A", "PLACEHOLDER-B", "PLACEHOLDER-C"))
    for value in (api_key, hf_token, password):
        assume(value not in clean)  # a value that the export holds anyway is no secret
    text = _everything(_runs(api_key, hf_token, password))
    for value in (api_key, hf_token, password):
        assert value not in text
    # ... and every export still says which secrets the server needs
    assert "VLLM_API_KEY" in text and "HF_TOKEN" in text and "DB_PASSWORD" in text
