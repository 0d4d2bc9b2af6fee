"""The board's judgement of a change (issue 39, item 3): better, worse, within noise or a
trade-off, by the objective and the worst SLO metric, each by its own direction."""

from __future__ import annotations

from fakes.runs import failed_run, served_run

from tui.domain.board.before_after import before_after
from tui.domain.board.judgement import Judged, judge
from tui.domain.board.metrics import ITL_P99, TTFT_P99
from tui.domain.board.noise import Groups, Verdict
from tui.domain.board.render import before_after_markdown, board_csv, board_text
from tui.domain.board.view import BoardView, build_board
from tui.domain.workload import LoadSpec


def _judged(base: object, run: object) -> Judged | None:
    judgement = judge(run, base, Groups([base, run]))  # type: ignore[list-item, arg-type]
    return judgement.judged if judgement is not None else None


def test_the_walk_of_issue_39_reads_worse_by_itl_p99_not_faster() -> None:
    """0.4% faster TTFT p99 and +24.1% ITL p99: ITL p99 decides, TTFT p99 is noise."""
    base = served_run(1, tput=1000.0, ttft_p99=100.0, itl_p99=40.0, max_num_seqs=256)
    run = served_run(2, tput=1004.0, ttft_p99=99.6, itl_p99=49.64, max_num_seqs=512)
    judgement = judge(run, base, Groups([base, run]))
    assert judgement is not None and judgement.judged is Judged.WORSE
    assert judgement.worst is not None and judgement.worst[0] is ITL_P99
    assert judgement.text() == "worse · out tok/s ~+0.4% · worst ITL p99 +24.1%"
    verdicts = dict(judgement.parts())
    assert verdicts["worst ITL p99 +24.1%"] is Verdict.LOSS
    assert verdicts["out tok/s ~+0.4%"] is Verdict.NOISE


def test_each_combination_of_objective_and_worst_latency() -> None:
    base = served_run(1, tput=1000.0, ttft_p99=100.0, max_num_seqs=256)
    cases = {
        (1200.0, 100.0): Judged.BETTER,  # more throughput, latencies flat
        (800.0, 100.0): Judged.WORSE,
        (1005.0, 100.5): Judged.NOISE,
        (1200.0, 150.0): Judged.TRADE_OFF,  # throughput bought with latency
        (800.0, 50.0): Judged.TRADE_OFF,  # latency bought with throughput
        (1000.0, 50.0): Judged.BETTER,  # latency alone improved
        (1000.0, 150.0): Judged.WORSE,
    }
    for (tput, ttft), expected in cases.items():
        run = served_run(2, tput=tput, ttft_p99=ttft, max_num_seqs=512)
        assert _judged(base, run) is expected, (tput, ttft)


def test_no_judgement_for_the_baseline_a_failed_start_or_another_load() -> None:
    base = served_run(1, max_num_seqs=256)
    assert _judged(base, base) is None
    assert _judged(base, failed_run(2)) is None
    other = served_run(3, tput=2000.0, workload=LoadSpec(num_prompts=200), max_num_seqs=512)
    assert _judged(base, other) is Judged.NOT_COMPARED


def test_before_after_shows_every_metric_that_moved_worse_first() -> None:
    base = served_run(1, tput=1000.0, ttft_p99=100.0, itl_p99=40.0, max_num_seqs=256)
    run = served_run(2, tput=1004.0, ttft_p99=99.6, itl_p99=49.64, max_num_seqs=512)
    ba = before_after(base, run)
    first = ba.rows[0]
    assert first.metric is ITL_P99 and first.comparison.verdict is Verdict.LOSS
    losses = [r for r in ba.rows if r.comparison.verdict is Verdict.LOSS]
    assert ba.rows[: len(losses)] == tuple(losses)
    ttft = next(r for r in ba.rows if r.metric is TTFT_P99)
    assert ttft.comparison.verdict is Verdict.NOISE and ttft.change == "0.4% faster (noise)"
    text = before_after_markdown(ba)
    assert "Verdict: worse · out tok/s ~+0.4% · worst ITL p99 +24.1%" in text
    assert text.index("ITL p99") < text.index("TTFT p99")


def test_the_table_has_a_verdict_column_that_shows_a_failed_start() -> None:
    runs = [
        served_run(1, tput=1000.0, max_num_seqs=256),
        served_run(2, tput=1300.0, max_num_seqs=512),
        failed_run(3, max_model_len=30576),
    ]
    board = build_board(runs, BoardView(pinned=1))
    verdicts = {r.label: r.cells[board.table.index("verdict")].text for r in board.table.rows}
    assert verdicts == {"#1": "baseline", "#2": "better", "#3": "failed"}
    assert "better" in board_text(board, 80) and "failed" in board_text(board, 80)
    assert ",better," in board_csv(board)
