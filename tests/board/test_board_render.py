"""Every rendering of the board carries the same rows, columns and verdicts."""

from __future__ import annotations

import csv
import io
import json

from fakes.runs import failed_run, served_run

from tui.domain.board.render import board_csv, board_json, board_markdown, board_text
from tui.domain.board.view import BoardView, build_board
from tui.domain.results import Reproduction
from tui.domain.workload import LoadSpec

REPRO = Reproduction(gpu_name="NVIDIA GeForce RTX 3080", gpu_count=1, vllm_version="0.32.0")


def _board():  # type: ignore[no-untyped-def]
    runs = [
        failed_run(1, max_model_len=30576, summary="max seq len | pipes | survive"),
        served_run(2, tput=800, max_num_seqs=256, repro=REPRO),
        served_run(3, tput=810, max_num_seqs=256, repro=REPRO),
        served_run(4, tput=950, max_num_seqs=512, repro=REPRO),
        served_run(5, tput=2000, max_num_seqs=512, workload=LoadSpec(num_prompts=200), repro=REPRO),
    ]
    return build_board(runs, BoardView(pinned=2))  # the default: test_board_baseline.py


def _md_rows(text: str) -> list[list[str]]:
    rows = [line for line in text.splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in rows]


def test_markdown_is_the_seed_table_with_failures_and_their_cause() -> None:
    text = board_markdown(_board())
    rows = _md_rows(text)
    header = rows[0]
    assert header[:9] == [
        "run",
        "changed",
        "verdict",
        "out tok/s",
        "TTFT p99",
        "TPOT mean",
        "ITL p99",
        "E2EL p99",
        "state",
    ]
    assert header[9:11] == ["`max_model_len`", "`max_num_seqs`"]
    assert header[-1] == "notes" and "prompts" in header
    assert all(len(r) == len(header) for r in rows[2:])  # escaped pipes split nothing
    failed = rows[2]
    assert (
        failed[2] == "failed"
        and failed[8] == "failed: kv_cache_too_small"
        and "max seq len \\| pipes" in failed[-1]
    )
    assert rows[3][0] == "#2 (base)" and "~+1.2%" in rows[4][header.index("out tok/s")]
    assert "+18.8%" in rows[5][header.index("out tok/s")]
    assert "(other load)" in rows[6][header.index("out tok/s")]
    assert "**Machine**: NVIDIA GeForce RTX 3080 ×1 · vLLM 0.32.0" in text


def test_csv_has_raw_numbers_and_json_has_the_verdicts() -> None:
    board = _board()
    table = list(csv.DictReader(io.StringIO(board_csv(board))))
    assert [r["label"] for r in table] == ["#1", "#2", "#3", "#4", "#5"]
    assert float(table[3]["out tok/s"]) == 950.0 and table[0]["out tok/s"] == ""
    assert float(table[3]["out tok/s vs baseline %"]) == 18.75
    assert table[0]["cause"].startswith("max seq len") and table[1]["baseline"] == "1"
    doc = json.loads(json.dumps(board_json(board)))
    assert doc["baseline"] == {"id": 2, "label": "#2", "reason": "pinned"}
    cells = {r["label"]: r["cells"]["metric:output_throughput"] for r in doc["rows"]}
    assert cells["#3"]["verdict"] == "noise" and cells["#4"]["verdict"] == "gain"
    assert cells["#5"]["verdict"] == "other load" and cells["#2"]["verdict"] == "baseline"
    assert doc["rows"][2]["cells"]["metric:output_throughput"]["spread"]["n"] == 2


def test_plain_text_lines_up_and_lists_causes() -> None:
    text = board_text(_board())
    lines = text.splitlines()
    assert lines[0].startswith("5 runs · vs #2")
    assert lines[1].split()[:2] == ["run", "changed"]
    assert "causes:" in lines and any("#1: max seq len" in line for line in lines)
