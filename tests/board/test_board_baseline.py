"""The baseline: pinned, else the first served run of the current session."""

from __future__ import annotations

from fakes.runs import failed_run, served_run

from tui.domain.board.baseline import BaselineReason, choose_baseline
from tui.domain.board.view import BoardView, build_board


def test_default_is_the_first_served_run_of_the_newest_session() -> None:
    runs = [
        served_run(1, session="old"),
        served_run(2, session="old"),
        failed_run(3, session="new"),  # a failed start has no numbers: skipped
        served_run(4, session="new"),
        served_run(5, session="new"),
    ]
    chosen = choose_baseline(runs)
    assert chosen is not None and chosen.run.id == 4
    assert chosen.reason is BaselineReason.FIRST_SERVED_THIS_SESSION
    # the session the console is in decides, not the newest run's, when given
    assert choose_baseline(runs, session="old").run.id == 1  # type: ignore[union-attr]


def test_a_session_with_nothing_served_falls_back_to_the_newest_served_run() -> None:
    runs = [served_run(1, session="a"), served_run(2, session="a"), failed_run(3, session="b")]
    chosen = choose_baseline(runs)
    assert chosen is not None and chosen.run.id == 2
    assert chosen.reason is BaselineReason.LATEST_SERVED_BEFORE


def test_pin_wins_and_a_missing_pin_says_so() -> None:
    runs = [served_run(1), served_run(2), served_run(3)]
    pinned = choose_baseline(runs, pinned=3)
    assert pinned is not None and pinned.run.id == 3 and pinned.reason is BaselineReason.PINNED
    gone = choose_baseline(runs, pinned=99)
    assert gone is not None and gone.run.id == 1 and "#99" in gone.note
    assert choose_baseline([failed_run(1)]) is None


def test_records_without_a_session_still_get_a_baseline() -> None:
    runs = [failed_run(1, session=None), served_run(2, session=None), served_run(3, session=None)]
    chosen = choose_baseline(runs)
    assert chosen is not None and chosen.run.id == 2


def test_every_delta_and_flag_diff_is_against_the_pinned_baseline() -> None:
    runs = [
        served_run(1, tput=800, max_num_seqs=128),
        served_run(2, tput=900, max_num_seqs=256),
        served_run(3, tput=1000, max_num_seqs=512),
    ]
    board = build_board(runs, BoardView(pinned=2))
    assert board.header().endswith("vs #2 (pinned)")
    rows = {r.label: r for r in board.table.rows}
    assert rows["#2"].is_baseline and not rows["#1"].is_baseline
    tput = board.table.index("metric:output_throughput")
    third = rows["#3"].cells[tput].comparison
    assert third is not None and third.reference == 900 and round(third.percent or 0, 3) == 11.111
    assert [(c.name, c.old, c.new) for c in rows["#3"].flag_changes] == [("max_num_seqs", 256, 512)]
    seqs = board.table.index("flag:max_num_seqs")
    assert rows["#1"].cells[seqs].differs and not rows["#2"].cells[seqs].differs
