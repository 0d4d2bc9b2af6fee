"""The board's lasting choices on disk: kept whole, private, and never a traceback."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tui.domain.board.saved import SavedBoard
from tui.store.board_file import board_path, read_board, write_board


def test_choices_come_back_as_written_beside_their_history(tmp_path: Path) -> None:
    path = board_path(tmp_path / "demo-runs.sqlite")
    assert path == tmp_path / "demo-runs.board.json"
    assert read_board(path) == SavedBoard()  # none yet: the defaults
    saved = SavedBoard(
        pinned=4,
        table=True,
        sort="metric:p99_ttft_ms",
        descending=True,
        filter="served max_num_seqs=4",
    )
    write_board(path, saved)
    assert read_board(path) == saved
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary left behind


@pytest.mark.parametrize(
    "text",
    ["", "not json", "[1, 2]", '{"pinned": "4", "table": 1, "sort": 7}', '{"pinned": true}'],
)
def test_a_damaged_or_foreign_file_reads_as_no_choices(tmp_path: Path, text: str) -> None:
    path = tmp_path / "runs.board.json"
    path.write_text(text)
    assert read_board(path) == SavedBoard()


def test_a_fifo_in_its_place_never_hangs(tmp_path: Path) -> None:
    import os

    path = tmp_path / "runs.board.json"
    os.mkfifo(path)
    assert read_board(path) == SavedBoard()
