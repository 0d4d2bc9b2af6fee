"""``vtc report`` holds the newest capacity answers: the twin's, and what real loads measured."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from fakes.capacity_twin import QueueTwin
from fakes.runs import served_run

from tui.app.cli import main
from tui.domain.board.view import BoardView, build_board
from tui.domain.capacity import RealLoad
from tui.domain.sweep.slo import SloLimits
from tui.domain.workload import LoadSpec
from tui.store.capacity_answers import recent_answers, save_answer
from tui.store.history import RunStore
from tui.store.report import report_html
from tui.twin.capacity import search

SLO = SloLimits(limits={"p99_ttft_ms": 500.0})


def test_the_page_holds_the_answer_its_curve_and_the_real_loads() -> None:
    answer = search(QueueTwin(), LoadSpec(num_prompts=50), SLO, target_rate=40.0)
    answer = answer.model_copy(
        update={
            "label": "predicted (twin <b>x</b> r1, ±10% validation)",
            "real_loads": [
                RealLoad(rate=answer.max_rate, stats={"p99_ttft_ms": 480.0}, met=True, run_id=7)
            ],
        }
    )
    board = build_board([served_run(1)], BoardView())
    page = report_html(
        board, generated=datetime(2026, 1, 2, tzinfo=UTC), source="s", capacity=[answer]
    )
    assert "<h2>Capacity" in page and "max 8 req/s" in page
    assert answer.replicas is not None
    assert f"{answer.replicas.needed} replicas for 40 req/s" in page
    assert "measured, 1 real loads" in page and "(#7)" in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page  # escaped
    assert page.count("<tr") >= len(answer.curve)
    without = report_html(board, generated=datetime(2026, 1, 2, tzinfo=UTC), source="s")
    assert "Capacity" not in without


def test_vtc_report_reads_the_kept_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VTC_DATA_DIR", str(tmp_path))
    store = RunStore(tmp_path / "runs.sqlite")
    store.add(served_run(1))
    store.close()
    answer = search(QueueTwin(), LoadSpec(num_prompts=50), SLO)
    save_answer(answer, tmp_path)
    (tmp_path / "capacity" / "zz-broken.json").write_text("{", encoding="utf-8")
    assert [a.max_rate for a in recent_answers(tmp_path)] == [answer.max_rate]  # broken: skipped
    out = tmp_path / "report.html"
    assert main(["report", "--output", str(out)]) == 0
    assert "max 8 req/s" in out.read_text(encoding="utf-8")
