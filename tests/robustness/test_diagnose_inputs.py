"""``vtc diagnose`` on every class of input: huge files, endless and silent streams, stdin,
garbage bytes, unreadable paths, logs with no failure. Real files, real processes, real pipes.

Bounds are asserted on what is kept (bytes, not seconds): speed lives in
``benchmarks/diagnose_large_log.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tui.server.log_excerpt import LogExcerpt, LogReadError, read_log_excerpt

# slow tier: each case runs the vtc command line in a process of its own.
pytestmark = pytest.mark.slow

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
FAILURE = (CAPTURES / "fail_a1_maxlen65536_kvbytes16M.log").read_bytes()
CLEAN = (CAPTURES / "startup_pressure.log").read_bytes()
JSON_KEYS = {"kind", "summary", "facts", "fixes", "evidence"}


def _vtc(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", "diagnose", *args],
        input=stdin,
        capture_output=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def huge_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 64 MB clean startup log, repeated, with the real failure capture at its very end."""
    path = tmp_path_factory.mktemp("huge") / "server.log"
    with path.open("wb") as f:
        block = CLEAN * 64
        written = 0
        while written < 64 * 2**20:
            f.write(block)
            written += len(block)
        f.write(FAILURE)
    return path


def test_a_huge_file_keeps_only_its_head_and_tail(huge_log: Path) -> None:
    head, tail = 64 * 1024, 512 * 1024
    excerpt = read_log_excerpt(huge_log, head_bytes=head, tail_bytes=tail)
    assert excerpt.bytes_seen == huge_log.stat().st_size
    assert excerpt.omitted_bytes == excerpt.bytes_seen - head - tail
    assert len(excerpt.text.encode()) < head + tail + 200  # + the "left out" marker line
    assert excerpt.text.rstrip().endswith(FAILURE.decode().rstrip()[-200:])
    assert excerpt.complete


def test_vtc_diagnose_finds_the_failure_at_the_end_of_a_huge_file(huge_log: Path) -> None:
    done = _vtc(str(huge_log), "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert set(doc) == JSON_KEYS
    assert doc["kind"] == "kv_cache_too_small"
    assert doc["fixes"][0]["set"] == {"max_model_len": 32640}
    assert b"read the first" in done.stderr  # says what was left out, on one line
    assert len(done.stderr.strip().splitlines()) == 1


def test_stdin_dash_reads_a_pipe() -> None:
    done = _vtc("-", stdin=FAILURE)
    assert done.returncode == 0
    assert done.stdout.startswith(b"kv_cache_too_small: ")


def _yes(line: bytes) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["sh", "-c", f"yes '{line.decode()}'"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )


def _read_fd(fd: int, **limits: float) -> LogExcerpt:
    return read_log_excerpt(f"/dev/fd/{fd}", **limits)  # type: ignore[arg-type]


@pytest.fixture
def endless() -> Iterator[subprocess.Popen[bytes]]:
    proc = _yes(b"(EngineCore pid=1) INFO 11-21 05:48:04 [core.py:1] still loading")
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_an_endless_stream_is_cut_at_the_size_limit(endless: subprocess.Popen[bytes]) -> None:
    assert endless.stdout is not None
    excerpt = _read_fd(
        endless.stdout.fileno(),
        head_bytes=4096,
        tail_bytes=65536,
        stream_limit_bytes=8 * 2**20,
        deadline_s=120.0,
    )
    assert not excerpt.complete and excerpt.stopped_by == "size limit"
    assert excerpt.bytes_seen >= 8 * 2**20
    assert len(excerpt.text) < 4096 + 65536 + 200
    assert "stopped reading at the size limit" in excerpt.note()


def test_a_silent_stream_is_cut_at_the_deadline() -> None:
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, FAILURE)  # then nothing more, and the writer never closes
        excerpt = _read_fd(read_end, deadline_s=0.5)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert not excerpt.complete and excerpt.stopped_by == "time limit"
    assert excerpt.text == FAILURE.decode()


def test_a_stream_that_ends_is_read_to_its_end() -> None:
    read_end, write_end = os.pipe()

    def writer() -> None:
        with os.fdopen(write_end, "wb") as f:
            for _ in range(200):
                f.write(CLEAN)
            f.write(FAILURE)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        excerpt = _read_fd(read_end, head_bytes=8192, tail_bytes=65536)
    finally:
        thread.join()
        os.close(read_end)
    assert excerpt.complete
    assert excerpt.bytes_seen == 200 * len(CLEAN) + len(FAILURE)
    assert excerpt.text.endswith(FAILURE.decode()[-1000:])


def test_device_files_that_never_end_are_bounded() -> None:
    excerpt = read_log_excerpt("/dev/zero", stream_limit_bytes=4 * 2**20, tail_bytes=2**20)
    assert not excerpt.complete
    assert len(excerpt.text) <= 256 * 1024 + 2**20 + 200


@pytest.mark.parametrize(
    "payload",
    [
        b"\x00" * 100_000,
        bytes(range(256)) * 4000,
        b"\xff\xfe" + "ValueError: Bfloat16 is only supported".encode("utf-16-le"),
        b"\x1b[31mERROR\x1b[0m " * 10_000 + b"\n",
        b"x" * (3 * 2**20),  # one line of 3 MB, no newline
    ],
    ids=["nuls", "all-bytes", "utf16", "ansi", "one-huge-line"],
)
def test_garbage_gets_an_answer_not_a_traceback(tmp_path: Path, payload: bytes) -> None:
    path = tmp_path / "garbage.log"
    path.write_bytes(payload)
    done = _vtc(str(path), "--json")
    assert done.returncode in (0, 1, 3), done.stderr
    assert set(json.loads(done.stdout)) == JSON_KEYS
    assert b"Traceback" not in done.stderr


def test_a_log_without_a_failure_says_so_with_its_own_exit_code() -> None:
    done = _vtc(str(CAPTURES / "startup_pressure.log"))
    assert done.returncode == 3
    assert b"no failure found" in done.stdout


def test_an_unknown_failure_exits_1() -> None:
    done = _vtc("-", stdin=b"Traceback (most recent call last):\nRuntimeError: something new\n")
    assert done.returncode == 1
    assert done.stdout.startswith(b"unknown: ")


@pytest.mark.parametrize("which", ["missing", "directory", "unreadable"])
def test_unreadable_input_is_one_line_and_exit_2(tmp_path: Path, which: str) -> None:
    path = tmp_path / "nope.log"
    if which == "directory":
        path.mkdir()
    elif which == "unreadable":
        path.write_text("x")
        path.chmod(0)
        if os.access(path, os.R_OK):  # root reads anything: nothing to test
            pytest.skip("running as root")
    done = _vtc(str(path))
    assert done.returncode == 2
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"vtc: cannot read {path}: ")


def test_read_errors_are_vtc_errors(tmp_path: Path) -> None:
    with pytest.raises(LogReadError, match="cannot read"):
        read_log_excerpt(tmp_path / "missing.log")


def test_help_documents_the_exit_codes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tui.cli", "diagnose", "--help"],
        capture_output=True,
        timeout=120,
        check=True,
    )
    text = done.stdout.decode()
    for code in ("0 = ", "1 = ", "2 = ", "3 = no failure found"):
        assert code in " ".join(text.split())
