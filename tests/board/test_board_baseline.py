"""The baseline: pinned, else the first completed like-for-like load (issue 17: the board
compared nothing by default: its baseline was a launch run with no load, a cancelled load,
or another model's sweep probe; issue 29: with the newest load as the default, the newest
run was its own baseline and the change showed on the old run, sign reversed)."""

from __future__ import annotations

from fakes.runs import failed_run, served_run

from tui.domain.board.baseline import NO_BASELINE, BaselineReason, choose_baseline
from tui.domain.board.load_mark import LoadMark, load_mark
from tui.domain.board.render import board_csv, board_json, board_markdown, board_text
from tui.domain.board.view import BoardView, build_board
from tui.domain.results import BenchResult, Reproduction, RunRecord, SweepTag
from tui.domain.workload import LoadSpec


def no_load(run_id: int, **kw: object) -> RunRecord:
    """A launch run: it served, nobody loaded it."""
    return served_run(run_id, **kw).model_copy(update={"bench": None, "workload": None})  # type: ignore[arg-type]


def cut(run: RunRecord, **bench: object) -> RunRecord:
    """``run`` with its load's result changed (cancelled, failed requests...)."""
    assert run.bench is not None
    return run.model_copy(update={"bench": run.bench.model_copy(update=bench)})


def test_the_first_completed_load_is_the_baseline_never_a_launch_run_without_one() -> None:
    runs = [failed_run(1), no_load(2), served_run(3, tput=800), served_run(4, tput=900)]
    chosen = choose_baseline(runs)
    assert chosen is not None and chosen.run.id == 3
    assert chosen.reason is BaselineReason.FIRST_LOAD
    board = build_board(runs)
    assert board.header() == "4 runs · vs #3 (first load)"
    tput = board.table.index("metric:output_throughput")
    rows = {r.label: r for r in board.table.rows}
    newest = rows["#4"].cells[tput].comparison
    assert newest is not None and newest.reference == 800 and newest.verdict.value != "other load"
    assert rows["#3"].is_baseline and rows["#3"].cells[tput].comparison is not None


def test_the_newest_run_reads_as_the_change_issue_29_story() -> None:
    # max_num_seqs 128 -> 4, restarted, loaded: the new run carries the loss, not the old one
    before = served_run(4, tput=1578.8, max_num_seqs=128)
    after = served_run(5, tput=821.4, max_num_seqs=4)
    board = build_board([before, after])
    assert board.baseline is not None and board.baseline.run.id == 4
    rows = {r.label: r for r in board.table.rows}
    tput = board.table.index("metric:output_throughput")
    change = rows["#5"].cells[tput].comparison
    assert change is not None and change.percent is not None and round(change.percent, 1) == -48.0
    assert [(c.name, c.old, c.new) for c in rows["#5"].flag_changes] == [("max_num_seqs", 128, 4)]
    assert rows["#4"].is_baseline and not rows["#4"].flag_changes


def test_no_load_yet_means_no_baseline_and_the_header_says_so() -> None:
    runs = [failed_run(1), no_load(2), no_load(3)]
    assert choose_baseline(runs) is None
    assert build_board(runs).header() == f"3 runs · {NO_BASELINE}"


def test_cancelled_and_partial_loads_are_never_chosen_and_are_marked_everywhere() -> None:
    whole = served_run(2, tput=800)
    cancelled = cut(served_run(3, tput=300), cancelled=True, num_prompts=32, completed=12)
    partial = cut(served_run(4, tput=700), failed=3, num_prompts=32, completed=29)
    runs = [whole, cancelled, partial]
    assert load_mark(cancelled.bench) is LoadMark.CANCELLED
    assert load_mark(partial.bench) is LoadMark.PARTIAL and load_mark(whole.bench) is None
    chosen = choose_baseline(runs)
    assert chosen is not None and chosen.run.id == 2
    board = build_board(runs)
    states = {r.label: r.state for r in board.table.rows}
    assert states == {
        "#2": "stopped",
        "#3": "stopped, load cancelled",
        "#4": "stopped, load partial",
    }
    for text in (board_text(board), board_markdown(board), board_csv(board)):
        assert "load cancelled" in text and "load partial" in text
    rows = {r["label"]: r for r in board_json(board)["rows"]}
    assert rows["#3"]["state"] == "stopped, load cancelled"
    assert rows["#3"]["load"] == "cancelled" and rows["#2"]["load"] is None


def test_another_model_or_workload_is_never_the_baseline_and_rows_say_why() -> None:
    other_load = LoadSpec(input_len=256)
    runs = [
        served_run(1, tput=800),
        served_run(2, tput=500, model="meta-llama/Llama-3.2-3B-Instruct"),
        served_run(3, tput=900, workload=other_load),
        served_run(4, tput=850),
    ]
    board = build_board(runs)
    assert board.baseline is not None and board.baseline.run.id == 1  # #4's workload, first
    rows = {r.label: r for r in board.table.rows}
    assert rows["#2"].like_for_like is not None
    assert rows["#2"].like_for_like.reasons[0].startswith("other model: meta-llama/Llama-3.2-3B")
    assert rows["#3"].like_for_like is not None
    assert rows["#3"].like_for_like.reasons == ("other workload: input 256 vs 128",)
    assert "other workload: input 256 vs 128" in board_markdown(board)


def test_a_sweep_probe_of_another_model_never_takes_over_a_hand_board() -> None:
    probe = served_run(3, model="meta-llama/Llama-3.2-3B-Instruct").model_copy(
        update={"sweep": SweepTag(sweep_id="sw1", trial=0)}
    )
    runs = [served_run(1, tput=700), served_run(2, tput=800), probe]
    chosen = choose_baseline(runs)
    assert chosen is not None and chosen.run.id == 1


def test_another_machine_is_not_like_for_like() -> None:
    h100 = Reproduction(gpu_name="NVIDIA H100", gpu_count=1)
    a100 = Reproduction(gpu_name="NVIDIA A100", gpu_count=1)
    runs = [served_run(1, repro=a100), served_run(2, repro=h100)]
    cancelled_h100 = cut(served_run(3, repro=h100), cancelled=True)
    chosen = choose_baseline([*runs, cancelled_h100])
    assert chosen is not None and chosen.run.id == 2  # like the newest load: same machine
    later_h100 = served_run(4, repro=h100)
    chosen = choose_baseline([*runs, cancelled_h100, later_h100])
    assert chosen is not None and chosen.run.id == 2  # the first H100 load, not the A100's


def test_a_baseline_without_a_load_says_so_when_pinned() -> None:
    runs = [no_load(1), served_run(2)]
    board = build_board(runs, BoardView(pinned=1))
    row = {r.label: r for r in board.table.rows}["#2"]
    assert row.like_for_like is not None and row.like_for_like.reasons == ("baseline has no load",)


def test_pin_wins_and_a_missing_pin_says_so() -> None:
    runs = [served_run(1), served_run(2), served_run(3)]
    pinned = choose_baseline(runs, pinned=1)
    assert pinned is not None and pinned.run.id == 1 and pinned.reason is BaselineReason.PINNED
    gone = choose_baseline(runs, pinned=99)
    assert gone is not None and gone.run.id == 1 and "#99" in gone.note
    assert choose_baseline([failed_run(1)]) is None


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


def test_bench_defaults_are_a_whole_load() -> None:
    assert load_mark(BenchResult(completed=8, num_prompts=8)) is None
    assert load_mark(BenchResult(completed=5, num_prompts=8, duration_limit_s=10.0)) is None
