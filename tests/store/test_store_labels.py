"""Run labels come from the store's ids: unique for the life of the history file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tui.domain.flags.serve import ServeFlags
from tui.domain.results import RunRecord
from tui.domain.workload import LoadSpec
from tui.store.history import RunStore


def test_labels_stay_unique_past_the_listing_cap(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    labels = [store.add(RunRecord(flags=ServeFlags(model="m"))).label for _ in range(206)]
    store.delete(3)  # a deleted id is never handed out again (AUTOINCREMENT)
    labels.append(store.add(RunRecord(flags=ServeFlags(model="m"))).label)
    assert len(set(labels)) == len(labels) == 207
    assert labels[205] == "#206" and labels[-1] == "#207"
    listed = store.list()  # capped at 200, newest last
    assert len(listed) == 200 and listed[-1].label == "#207"
    store.close()


def test_an_explicit_label_is_kept(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    assert store.add(RunRecord(flags=ServeFlags(model="m"), label="attached")).label == "attached"
    store.close()


def test_records_written_by_the_previous_version_still_read(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = RunStore(path)
    store.close()
    legacy = {
        "id": 1,
        "created_at": "2026-01-01T00:00:00Z",
        "label": "#1",
        "flags": {"model": "m"},
        "status": "ready",
        "workload": {"num_prompts": 32, "request_rate": 2.0},
        "telemetry": {"peak_kv_cache_usage": 0.5, "peak_gpu_util": 97.0},
    }
    empty = {**legacy, "id": 2, "label": "#2", "workload": {}, "telemetry": {}}
    with sqlite3.connect(path) as conn:
        for row in (legacy, empty):
            conn.execute(
                "INSERT INTO runs (id, created_at, status, model, record) VALUES (?, ?, ?, ?, ?)",
                (row["id"], row["created_at"], "ready", "m", json.dumps(row)),
            )
    store = RunStore(path)
    first, second = store.list()
    assert first.workload == LoadSpec(num_prompts=32, request_rate=2.0)
    assert first.peaks.kv_cache_usage == 0.5 and first.peaks.gpu_util == 97.0
    assert second.workload is None and second.peaks.kv_cache_usage is None
    store.close()
