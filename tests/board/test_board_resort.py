"""A sort reorders the built board (issue 39: ``[``/``]`` rebuilt and judged every run
again): :func:`resort_board` gives the board :func:`build_board` gives for that view."""

from __future__ import annotations

import pytest
from fakes.runs import failed_run, served_run

from tui.domain.board.table import BoardError
from tui.domain.board.view import BoardView, build_board, resort_board
from tui.domain.results import RunRecord


def runs() -> list[RunRecord]:
    return [
        served_run(1, tput=900.0, ttft_p99=150.0, max_num_seqs=64),
        served_run(2, tput=700.0, ttft_p99=90.0, max_num_seqs=128),
        failed_run(3, max_num_seqs=512),
        served_run(4, tput=1100.0, ttft_p99=300.0, max_num_seqs=256),
    ]


def test_every_sort_of_the_built_board_is_the_board_built_for_it() -> None:
    shown = runs()
    built = build_board(shown, BoardView(pinned=2, selected=4))
    keys = [c.key for c in built.table.columns]
    assert len(keys) > 3
    board = built
    for key in keys:
        for descending in (False, True):
            view = BoardView(pinned=2, selected=1, sort=key, descending=descending)
            board = resort_board(board, view)  # from the last one, sorted another way
            fresh = build_board(shown, view)
            assert board.view == view
            assert board.table == fresh.table, (key, descending)
            assert board.scatter == fresh.scatter
    unsorted = resort_board(board, BoardView(pinned=2))
    assert unsorted.table == build_board(shown, BoardView(pinned=2)).table


def test_a_sort_by_a_column_the_board_lacks_fails_as_a_build_does() -> None:
    board = build_board(runs())
    with pytest.raises(BoardError):
        resort_board(board, BoardView(sort="flag:no_such_flag"))
    with pytest.raises(BoardError):
        build_board(runs(), BoardView(sort="flag:no_such_flag"))
