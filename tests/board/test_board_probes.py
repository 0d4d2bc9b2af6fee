"""A sweep's probe loads (issue 17): rate bisection runs several loads on one trial's server,
each kept as a run of its own (issue 23: nothing measured is overwritten). Each says it is
a probe of its trial's run (``probe 2 of #5``) on the board, in ``vtc runs`` (text, md, csv,
json) and the report, and the automatic baseline never picks one."""

from __future__ import annotations

from datetime import UTC, datetime

from fakes.runs import served_run, trial_and_probes

from tui.domain.board.baseline import choose_baseline
from tui.domain.board.render import board_csv, board_json, board_markdown, board_text
from tui.domain.board.view import build_board
from tui.domain.results import SweepTag
from tui.domain.workload import LoadSpec
from tui.store.report import report_html


def test_a_probe_is_never_the_automatic_baseline() -> None:
    runs = trial_and_probes()
    assert [r.probe for r in runs] == [False, True, True]
    chosen = choose_baseline(runs)
    assert chosen is not None and chosen.run.id == 5  # the trial's run, not the newer probes
    hand = served_run(3, tput=650, workload=LoadSpec(request_rate=4.0))
    chosen = choose_baseline([hand, *runs])
    assert chosen is not None and chosen.run.id == 3  # the first load, a hand run's
    chosen = choose_baseline([*runs, hand.model_copy(update={"id": 8, "label": "#8"})])
    assert chosen is not None and chosen.run.id == 5  # the first load that is no probe


def test_probes_say_so_in_every_format() -> None:
    board = build_board(trial_and_probes())
    for text in (board_text(board, width=200), board_markdown(board), board_csv(board)):
        assert "probe 2 of #5" in text and "probe 3 of #5" in text
        assert "probe 1" not in text  # the trial's own run is the trial
    rows = {row["label"]: row for row in board_json(board)["rows"]}
    assert rows["#6"]["probe"] == {"of": 5, "load": 2} and rows["#5"]["probe"] is None
    html = report_html(board, generated=datetime(2026, 11, 28, tzinfo=UTC), source="runs.sqlite")
    assert "probe 2 of #5" in html and "probe 3 of #5" in html


def test_the_sweep_column_comes_after_the_flags_and_metrics() -> None:
    """At 80 columns the table shows the columns that fit whole, in order: a console sweep's
    long id (``console-search-max_num_seqs-max_num_batched_tokens t7 p2``) in front hid every
    flag and metric behind it (seen in tmux: only ``run`` and ``state`` showed)."""
    long = SweepTag(sweep_id="console-search-max_num_seqs-max_num_batched_tokens", trial=7)
    runs = [
        served_run(3, tput=700, max_num_seqs=64),
        served_run(4, tput=750, max_num_seqs=128).model_copy(update={"sweep": long}),
    ]
    keys = [c.key for c in build_board(runs).table.columns]
    assert keys[:9] == [
        "label",
        "change",
        "verdict",
        "metric:output_throughput",
        "metric:p99_ttft_ms",
        "metric:mean_tpot_ms",
        "metric:p99_itl_ms",
        "metric:p99_e2el_ms",
        "state",
    ]
    assert keys[9] == "flag:max_num_seqs"
    assert keys[-1] == "sweep" and any(k.startswith("metric:") for k in keys)
