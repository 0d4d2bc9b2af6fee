"""LogBuffer: a bounded ring in memory, every line in the file, secrets redacted."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tui.server.logbuffer import LogBuffer, clean_line


def test_ring_keeps_the_newest_lines_and_the_file_keeps_all(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "serve.log"
    buf = LogBuffer(max_lines=3, path=path)
    for i in range(5):
        buf.append(f"line {i}")
    buf.close()
    assert buf.lines() == ["line 2", "line 3", "line 4"]
    assert buf.total == 5
    assert buf.dropped == 2
    assert path.read_text().splitlines() == [f"line {i}" for i in range(5)]
    assert buf.tail(2) == ["line 3", "line 4"]
    assert buf.tail(10) == ["line 2", "line 3", "line 4"]
    assert buf.tail(0) == []
    assert buf.text() == "line 2\nline 3\nline 4"
    assert buf[-1] == "line 4"
    assert buf[0:2] == ["line 2", "line 3"]
    assert len(buf) == 3
    assert list(buf) == buf.lines()
    assert "line 3" in buf


def test_lines_after_close_stay_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "serve.log"
    buf = LogBuffer(max_lines=10, path=path)
    buf.append("before")
    buf.close()
    buf.append("after")
    assert buf.lines() == ["before", "after"]
    assert path.read_text() == "before\n"


def test_file_only_header(tmp_path: Path) -> None:
    buf = LogBuffer(path=tmp_path / "serve.log")
    buf.write_file_only("# vtc: vllm serve m")
    buf.append("first")
    buf.close()
    assert buf.lines() == ["first"]
    assert (tmp_path / "serve.log").read_text() == "# vtc: vllm serve m\nfirst\n"


def test_secrets_are_redacted_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "serve.log"
    buf = LogBuffer(path=path, secrets=["sk-abc", "sk-abcdef", ""])
    stored = buf.append("key=sk-abcdef and sk-abc")
    buf.close()
    assert stored == "key=*** and ***"
    assert "sk-abc" not in path.read_text()
    assert buf.lines() == ["key=*** and ***"]


def test_clean_line_strips_newline_ansi_and_progress_redraws() -> None:
    assert clean_line("plain\n") == "plain"
    assert clean_line("\x1b[32mINFO\x1b[0m ready\r\n") == "INFO ready"
    assert clean_line("Loading: 10%\rLoading: 50%\rLoading: 100%\n") == "Loading: 100%"


def test_reader_threads_see_consistent_copies() -> None:
    buf = LogBuffer(max_lines=100)
    errors: list[BaseException] = []

    def read() -> None:
        try:
            for _ in range(200):
                lines = buf.lines()
                assert len(lines) <= 100
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(2000):
        buf.append(str(i))
    reader.join()
    assert errors == []
    assert buf.lines()[-1] == "1999"


def test_bad_size_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="max_lines"):
        LogBuffer(max_lines=0)
