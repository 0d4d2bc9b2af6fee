"""The server state file: round trip, atomic replacement, unreadable files, guarded removal."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tui.domain.flags.serve import ServeFlags
from tui.store.server_state import (
    DEMO_STATE_FILE,
    STATE_FILE,
    ServerStateError,
    ServerStateFile,
    ServerStateRecord,
)


def record(pid: int = 4242, **changes: object) -> ServerStateRecord:
    base = ServerStateRecord(
        pid=pid,
        pgid=pid,
        create_time=1_700_000_000.25,
        base_url="http://127.0.0.1:8000",
        argv=["/venv/bin/vllm", "serve", "m", "--max-model-len", "4096", "--port", "8000"],
        flags=ServeFlags(model="m", max_model_len=4096, port=8000).model_dump(
            mode="json", exclude_none=True
        ),
        log_path="/data/logs/serve-1.log",
        run_id=7,
        mode="vllm",
        started_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        console_pid=99,
        console_create_time=1_700_000_000.5,
    )
    return base.model_copy(update=changes)


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    file = ServerStateFile(tmp_path / "server.json")
    assert file.read() is None  # no file: nothing recorded, not an error
    file.write(record())
    back = file.read()
    assert back == record()
    assert back is not None
    assert ServeFlags.model_validate(back.flags) == ServeFlags(
        model="m", max_model_len=4096, port=8000
    )
    assert json.loads(file.path.read_text())["pid"] == 4242  # plain JSON, readable by hand


def test_demo_and_real_vllm_keep_separate_files(tmp_path: Path) -> None:
    assert ServerStateFile.in_data_dir(tmp_path, demo=True).path == tmp_path / DEMO_STATE_FILE
    assert ServerStateFile.in_data_dir(tmp_path, demo=False).path == tmp_path / STATE_FILE


def test_a_write_replaces_the_file_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    file = ServerStateFile(tmp_path / "sub" / "server.json")  # the data dir may not exist yet
    file.write(record(pid=1))
    inode = file.path.stat().st_ino
    file.write(record(pid=2))
    read = file.read()
    assert read is not None and read.pid == 2
    assert file.path.stat().st_ino != inode  # a new file renamed over the old, not rewritten
    assert sorted(p.name for p in file.path.parent.iterdir()) == ["server.json"]


def test_a_failed_write_keeps_the_old_file_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = ServerStateFile(tmp_path / "server.json")
    file.write(record(pid=1))

    def crash(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="No space"):
        file.write(record(pid=2))
    monkeypatch.undo()
    read = file.read()
    assert read is not None and read.pid == 1
    assert [p.name for p in tmp_path.iterdir()] == ["server.json"]  # temporary cleaned up


@pytest.mark.parametrize(
    "text",
    ["", "{", "[]", '{"pid": "x"}', json.dumps({"pid": 1, "pgid": 1, "base_url": "u"})],
)
def test_an_unreadable_file_is_an_error_naming_it(tmp_path: Path, text: str) -> None:
    file = ServerStateFile(tmp_path / "server.json")
    file.path.write_text(text)
    with pytest.raises(ServerStateError, match=r"server\.json"):
        file.read()


def test_remove_with_a_pid_only_removes_that_servers_file(tmp_path: Path) -> None:
    file = ServerStateFile(tmp_path / "server.json")
    file.write(record(pid=10))
    assert file.remove(pid=11) is False  # another console's server now: not ours to delete
    assert file.exists()
    assert file.remove(pid=10) is True
    assert not file.exists()
    assert file.remove() is False  # already gone
    file.path.write_text("garbage")
    assert file.remove(pid=10) is False  # cannot tell whose: left for the next vtc to report
    assert file.remove() is True
