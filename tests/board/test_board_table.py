"""The table model: columns from what differs, sorting (numbers as numbers, N/A last), filters."""

from __future__ import annotations

import pytest
from fakes.runs import failed_run, served_run
from hypothesis import given
from hypothesis import strategies as st

from tui.domain.board.table import (
    BoardError,
    ColumnKind,
    RowFilter,
    StateFilter,
    build_table,
    parse_flag_match,
    state_text,
)
from tui.domain.results import RunStatus
from tui.domain.workload import LoadSpec


def _keys(table) -> list[str]:  # type: ignore[no-untyped-def]
    return [c.key for c in table.columns]


def test_one_column_per_flag_that_differs_anywhere_in_declaration_order() -> None:
    runs = [
        failed_run(1, max_model_len=30576),
        served_run(2, max_model_len=400, max_num_seqs=256),
        served_run(3, max_model_len=400, max_num_seqs=256, block_size=32),
        served_run(4, max_model_len=400, max_num_seqs=256, dtype="auto"),  # == vLLM's default
    ]
    table = build_table(runs)
    flags = [c.name for c in table.columns if c.kind is ColumnKind.FLAG]
    assert flags == ["max_model_len", "block_size", "max_num_seqs"]
    assert _keys(table)[:2] == ["label", "metric:output_throughput"]  # no baseline: no change
    based = build_table(runs, baseline=runs[1])
    assert _keys(based)[:9] == [
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
    changes = {r.label: r.cells[1].text for r in based.rows}
    assert changes == {
        "#1": "max-model-len 30576 +1",
        "#2": "",
        "#3": "block-size 32",
        "#4": "same",
    }
    assert table.rows[0].state == "failed: kv_cache_too_small"
    assert table.rows[0].cause and "30576" in table.rows[0].cause


def test_workload_columns_appear_only_when_workloads_differ() -> None:
    same = [served_run(1), served_run(2, max_num_seqs=512)]
    assert not [c for c in build_table(same).columns if c.kind is ColumnKind.WORKLOAD]
    mixed = [*same, served_run(3, workload=LoadSpec(num_prompts=200, input_len=512))]
    loads = [c.title for c in build_table(mixed).columns if c.kind is ColumnKind.WORKLOAD]
    assert loads == ["in len", "prompts"]


def test_goodput_shows_only_when_a_run_was_measured_against_slos() -> None:
    assert "metric:request_goodput" not in _keys(build_table([served_run(1)]))
    table = build_table([served_run(1), served_run(2, goodput=3.5)])
    assert "metric:request_goodput" in _keys(table)


def test_states_stay_true_to_how_each_run_ended() -> None:
    died = served_run(2).model_copy(update={"status": RunStatus.FAILED})
    assert state_text(died) == "died"
    for status in (RunStatus.STOPPED, RunStatus.REPLACED, RunStatus.LOST, RunStatus.READY):
        assert state_text(served_run(1).model_copy(update={"status": status})) == status.value


tputs = st.lists(st.one_of(st.none(), st.floats(0, 1e4, allow_nan=False)), min_size=1, max_size=12)


@given(values=tputs, descending=st.booleans())
def test_sorting_puts_numbers_in_numeric_order_and_na_last(
    values: list[float | None], descending: bool
) -> None:
    runs = [
        served_run(i + 1, tput=v) if v is not None else failed_run(i + 1)
        for i, v in enumerate(values)
    ]
    table = build_table(runs).sorted_by("metric:output_throughput", descending=descending)
    i = table.index("metric:output_throughput")
    seen = [r.cells[i].sort for r in table.rows]
    known = [v for v in seen if v is not None]
    assert seen[: len(known)] == known  # every N/A after every number
    assert known == sorted(known, reverse=descending)  # type: ignore[type-var]
    assert sorted(r.run.id for r in table.rows) == list(range(1, len(values) + 1))  # type: ignore[type-var]


def test_labels_sort_by_run_number_and_flags_by_value() -> None:
    runs = [served_run(i, max_num_seqs=s) for i, s in ((10, 64), (9, 1024), (2, 256))]
    table = build_table(runs)
    assert [r.label for r in table.sorted_by("run").rows] == ["#2", "#9", "#10"]
    by_seqs = table.sorted_by("max_num_seqs", descending=True)
    assert [r.label for r in by_seqs.rows] == ["#9", "#2", "#10"]
    with pytest.raises(BoardError, match="no column 'nope'"):
        table.sorted_by("nope")


def test_filters_by_state_and_by_flag_value() -> None:
    runs = [failed_run(1), served_run(2, max_num_seqs=256), served_run(3, max_num_seqs=512)]
    served = build_table(runs, row_filter=RowFilter(StateFilter.SERVED))
    assert [r.label for r in served.rows] == ["#2", "#3"]
    failed = build_table(runs, row_filter=RowFilter(StateFilter.FAILED))
    assert [r.label for r in failed.rows] == ["#1"]
    match = parse_flag_match("max-num-seqs=512")
    only = build_table(runs, row_filter=RowFilter(flags=(match,)))
    assert [r.label for r in only.rows] == ["#3"]
    # typed by the flag's own parser: 0.92 is vLLM's default, so unset runs match it
    default = parse_flag_match("gpu_memory_utilization=0.92")
    assert len(build_table(runs, row_filter=RowFilter(flags=(default,))).rows) == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("max_num_seqs", "expected NAME=VALUE"),
        ("nope=1", "no flag named 'nope'"),
        ("max_num_seqs=lots", "invalid int value"),
    ],
)
def test_bad_filters_are_one_clear_line(text: str, message: str) -> None:
    with pytest.raises(BoardError, match=message) as caught:
        parse_flag_match(text)
    assert "\n" not in caught.value.one_line()
