"""Environment variables are fixes too, and a fix always changes something (issue 19)."""

from __future__ import annotations

import json
from pathlib import Path

from tui.domain.diagnosis import Fix
from tui.domain.flags.serve import ServeFlags
from tui.server.diagnose import diagnose
from tui.server.parser_env import MARKER, find_parser_env


def test_an_env_fix_sets_and_removes_variables() -> None:
    fix = Fix(title="V1 runner", env={"VLLM_USE_V2_MODEL_RUNNER": "0", "OLD": None})
    assert not fix.is_empty and Fix(title="nothing").is_empty
    flags = ServeFlags(model="m", env={"OLD": "1", "KEEP": "x"})
    assert fix.applied_to(flags).environment == {"KEEP": "x", "VLLM_USE_V2_MODEL_RUNNER": "0"}
    assert fix.describe() == "VLLM_USE_V2_MODEL_RUNNER=0, unset OLD"


def test_no_offered_fix_is_empty_whatever_the_log() -> None:
    logs = [
        "vllm serve: error: argument --tool-call-parser: invalid choice: 'hermes2' "
        "(choose from 'hermes', 'mistral')",
        "vllm: error: unrecognized arguments: --no-such-flag 3",
        "ValueError: LoRA rank 48 is greater than max_lora_rank 16.",
        "RuntimeError: UVA is not available",
    ]
    for text in logs:
        d = diagnose(text + "\n")
        assert d.fixes or d.kind == "unknown_flag", text
        assert all(not f.is_empty for f in d.fixes), text
    lora = diagnose("ValueError: LoRA rank 48 is greater than max_lora_rank 16.\n")
    assert lora.fixes[0].set == {"extra_args": ("--max-lora-rank=64",)}  # next allowed rank
    choice = diagnose(logs[0] + "\n")
    assert choice.fixes[0].set == {"extra_args": ("--tool-call-parser=hermes",)}


def test_a_parser_env_is_found_only_when_complete(tmp_path: Path) -> None:
    assert find_parser_env("0.33.0", tmp_path) is None
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    (tmp_path / MARKER).write_text(json.dumps({"version": "0.33.0", "python": str(python)}))
    assert find_parser_env("0.33.0", tmp_path) == python
    assert find_parser_env("0.34.0", tmp_path) is None
