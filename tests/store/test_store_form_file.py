"""The flags form kept on disk: whole, private, read back through validation, and a file that
cannot be used is one line, never a traceback (issue 39, item 5)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tui.domain.flags.serve import ServeFlags
from tui.domain.saved_form import SavedForm
from tui.domain.workload import LoadSpec
from tui.store.form_file import form_path, read_form, write_form

SAVED = SavedForm(
    ServeFlags(
        model="meta-llama/Llama-3.1-8B-Instruct",
        max_num_seqs=64,
        max_model_len=4096,
        extra_args=("--disable-log-stats",),
        env=(("VLLM_USE_V1", "1"),),
    ),
    LoadSpec(num_prompts=12, max_concurrency=4),
    "demo-rtx3080-8b-fp8",
)


def test_the_form_comes_back_as_written_beside_its_history(tmp_path: Path) -> None:
    path = form_path(tmp_path / "demo-runs.sqlite")
    assert path == tmp_path / "demo-runs.form.json"
    missing = read_form(path)
    assert missing.saved is None and missing.note is None  # nothing kept: no word
    write_form(path, SAVED)
    back = read_form(path)
    assert back.saved == SAVED and back.note is None
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary left behind


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[1, 2]",
        '{"flags": {"model": "m", "max_num_seqs": -4}, "load": {}}',
        '{"flags": {"model": "m"}, "load": {"num_prompts": "many"}}',
        '{"flags": {"model": "m", "extra_args": ["--api-key", "sk-abcdefabcdefabcdef12"]}}',
    ],
)
def test_a_damaged_or_foreign_file_loses_nothing_and_says_one_line(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "runs.form.json"
    path.write_text(text)
    read = read_form(path)
    assert read.saved is None and read.note is not None
    assert "\n" not in read.note and str(path) in read.note and "starts afresh" in read.note
    assert "sk-abcdef" not in read.note
    assert path.read_text() == text  # left as it was until the next valid edit
