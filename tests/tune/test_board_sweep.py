"""A sweep's trials on the board: a ``sweep`` column when any run has one, a filter by sweep."""

from __future__ import annotations

from fakes.runs import failed_run, served_run

from tui.domain.board.table import ColumnKind, RowFilter, build_table
from tui.domain.results import SweepTag


def test_trials_show_their_sweep_and_the_board_filters_by_it() -> None:
    hand = served_run(1, max_num_seqs=64)
    t1 = failed_run(2, max_num_seqs=512).model_copy(
        update={"sweep": SweepTag(sweep_id="003-auto-1a2b", trial=1)}
    )
    t2 = served_run(3, max_num_seqs=128).model_copy(
        update={"sweep": SweepTag(sweep_id="003-auto-1a2b", trial=2)}
    )
    other = served_run(4, max_num_seqs=256).model_copy(
        update={"sweep": SweepTag(sweep_id="000-rtx-9f9f", trial=1)}
    )
    table = build_table([hand, t1, t2, other])
    col = table.index("sweep")
    assert table.columns[col].kind is ColumnKind.SWEEP
    assert [row.cells[col].text for row in table.rows] == [
        "",
        "003-auto-1a2b t1",
        "003-auto-1a2b t2",
        "000-rtx-9f9f t1",
    ]
    only = build_table([hand, t1, t2, other], row_filter=RowFilter(sweep="003-auto"))
    assert [row.run.id for row in only.rows] == [2, 3]  # the failed start included
    assert "sweep" not in [c.key for c in build_table([hand]).columns]  # hand runs: no column
