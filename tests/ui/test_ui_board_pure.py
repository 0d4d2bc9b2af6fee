"""The board's console helpers that need no app: filters as typed, preset names and labels,
the deltas a cell shows, the charts a run's series gives."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from ui_fakes import presets

from tui.domain.board.noise import Comparison, Verdict
from tui.domain.board.table import BoardError, FlagMatch, RowFilter, StateFilter
from tui.domain.diagnosis import Diagnosis, Fix
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import RunRecord, RunStatus
from tui.domain.telemetry import SeriesPoint
from tui.domain.workload import LoadSpec
from tui.ui.board_cells import shown_delta
from tui.ui.board_query import check_filter, filter_text, parse_filter
from tui.ui.presets_view import check_preset_name, holds, preset_from_form, preset_label
from tui.ui.widgets.results_board import fix_hint
from tui.ui.widgets.series_charts import chart_label, chart_rows


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", RowFilter()),
        ("all", RowFilter()),
        ("served", RowFilter(StateFilter.SERVED)),
        ("FAILED", RowFilter(StateFilter.FAILED)),
        (
            "served max-num-seqs=256",
            RowFilter(StateFilter.SERVED, (FlagMatch("max_num_seqs", 256),)),
        ),
        (
            "max_num_batched_tokens=8k enable_prefix_caching=on",
            RowFilter(
                flags=(
                    FlagMatch("max_num_batched_tokens", 8000),
                    FlagMatch("enable_prefix_caching", True),
                )
            ),
        ),
    ],
)
def test_a_filter_reads_as_typed_and_prints_back(text: str, expected: RowFilter) -> None:
    parsed = parse_filter(text)
    assert parsed == expected
    assert parse_filter(filter_text(parsed)) == parsed
    assert check_filter(text) is None


@pytest.mark.parametrize("text", ["ready-ish", "max_num_seqs=many", "no_such_flag=1"])
def test_a_filter_that_cannot_be_read_says_which_term(text: str) -> None:
    with pytest.raises(BoardError):
        parse_filter(text)
    problem = check_filter(text)
    assert problem is not None and text.split("=")[0].replace("-", "_")[:5] in problem


def test_preset_names_are_file_safe_and_labels_name_the_target() -> None:
    assert check_preset_name("h100-8b_fp8.v2") is None
    assert check_preset_name("  ") is not None
    assert "/" in (check_preset_name("my/preset") or "")
    best = presets()[0]
    assert preset_label(best) == "rtx3080-8b-fp8-best · Llama-3.1-8B-Instruct"
    aimed = best.model_copy(update={"sim_gpu": "rtx3080-10gb"})
    assert preset_label(aimed).endswith("· rtx3080-10gb")


def test_a_saved_preset_keeps_its_origins_target_and_the_form_values() -> None:
    origin = presets()[0].model_copy(update={"sim_gpu": "rtx3080-10gb"})
    flags = origin.flags.replace(max_num_seqs=96)
    when = datetime(2026, 1, 2, tzinfo=UTC)
    saved = preset_from_form(
        " mine ",
        flags,
        origin.workload,
        based_on=origin,
        machine="demo · simulated rtx3080-10gb",
        now=when,
    )
    assert saved.name == "mine" and saved.flags == flags and saved.sim_gpu == "rtx3080-10gb"
    assert "edited from rtx3080-8b-fp8-best" in saved.description
    assert saved.source == "vtc console, 2026-01-02, demo · simulated rtx3080-10gb"
    # the form holds a preset until a flag or its workload differs
    assert holds(origin, origin.flags, origin.workload)
    assert not holds(origin, flags, origin.workload)
    assert not holds(origin, origin.flags, LoadSpec(num_prompts=1))
    assert holds(presets()[1], presets()[1].flags, LoadSpec(num_prompts=1))  # no workload
    assert not holds(origin, None, origin.workload)


@pytest.mark.parametrize(
    ("comparison", "shown"),
    [
        (Comparison(100.0, 100.0, 0.0, Verdict.NOISE), ""),
        (Comparison(103.0, 100.0, 3.0, Verdict.NOISE), "~+3.0%"),
        (Comparison(120.0, 100.0, 20.0, Verdict.GAIN), "+20.0%"),
        (Comparison(100.0, 100.0, 0.0, Verdict.OTHER_LOAD), "(other load)"),
        (Comparison(100.0, 100.0, 0.0, Verdict.BASELINE), ""),
        (None, ""),
    ],
)
def test_a_cell_shows_the_domains_delta_less_a_change_of_nothing(
    comparison: Comparison | None, shown: str
) -> None:
    assert shown_delta(comparison) == shown


def test_charts_leave_out_series_without_values() -> None:
    series = [SeriesPoint(t=float(i), kv_cache_usage=i / 10, gpu_util=None) for i in range(5)]
    rows = chart_rows(series)
    assert [chart.label for chart, _ in rows] == ["KV cache %"]
    chart, values = rows[0]
    assert values == [0.0, 10.0, 20.0, 30.0, 40.0]
    assert chart_label(chart, values).split() == ["KV", "cache", "%", "0%–40%"]
    assert chart_rows([]) == []


def test_a_failed_card_says_which_fix_f_takes_now() -> None:
    """The card's hint is ``f``'s own choice: the next untried fix, none when ``f`` stops."""
    base = ServeFlags(model="m", max_model_len=30576)
    util = Fix(title="Raise gpu_memory_utilization to 0.95", set={"gpu_memory_utilization": 0.95})
    lower = Fix(title="Lower max_model_len to 928", set={"max_model_len": 928})

    def failed(run_id: int, flags: ServeFlags, *fixes: Fix) -> RunRecord:
        diagnosis = Diagnosis(kind="kv_cache_too_small", summary="too small", fixes=list(fixes))
        return RunRecord(
            id=run_id, label=f"#{run_id}", flags=flags, status=RunStatus.FAILED, diagnosis=diagnosis
        )

    assert fix_hint([failed(1, base, util, lower)]) == (1, "f applies fix 1 and restarts")
    tried = failed(1, base.replace(gpu_memory_utilization=0.95))
    assert fix_hint([tried, failed(2, base, util, lower)]) == (2, "f applies fix 2 and restarts")
    assert fix_hint([failed(1, base)]) == (None, None)  # nothing to apply: no hint
    assert fix_hint([]) == (None, None)
