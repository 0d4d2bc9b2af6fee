"""The log relay and the console's end of it, with real pipes and a real relay process."""

from __future__ import annotations

import asyncio
import io
import os
import sys
from pathlib import Path

import psutil
import pytest
from fakes.net import gone
from fakes.waiting import until

from tui.server.relay import CUT_MARK, read_lines, relay, secrets_from_env
from tui.server.spawn import OutputLink, spawn


def test_lines_are_split_and_an_endless_line_is_cut() -> None:
    data = b"one\ntwo\n" + b"x" * 25 + b"\nend"
    lines = list(read_lines(io.BytesIO(data), limit=10))
    assert lines == [b"one", b"two", b"x" * 10 + CUT_MARK.encode(), b"end"]


def test_secrets_are_the_values_of_secret_named_variables() -> None:
    env = {"VLLM_API_KEY": "sk-abcdef", "HF_TOKEN": "hf_123456", "SHORT_TOKEN": "1", "HOME": "/r"}
    assert sorted(secrets_from_env(env)) == ["hf_123456", "sk-abcdef"]


def test_the_relay_cleans_redacts_and_goes_on_without_the_console(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    tee_r, tee_w = os.pipe()
    os.close(tee_r)  # the console is gone before the first line: every tee write fails
    source = io.BytesIO(b"\x1b[32mgreen\x1b[0m\nkey sk-abcdef here\r\nbar 10%\rbar 100%\n")
    assert relay(source, log, ["sk-abcdef"], tee_w) == 0
    assert log.read_text().splitlines() == ["green", "key *** here", "bar 100%"]


def test_a_sync_token_is_passed_to_the_console_only(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    tee_r, tee_w = os.pipe()
    token = b"\x1evtc-sync-1"
    source = io.BytesIO(b"a\npartial" + token + b"\nb\n")
    relay(source, log, [], tee_w, token)
    with os.fdopen(tee_r, "rb") as tee:
        assert tee.read().splitlines() == [b"a", b"partial", token, b"b"]
    assert log.read_text().splitlines() == ["a", "partial", "b"]


async def test_the_console_reads_syncs_and_detaches_while_the_file_grows(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_text("# vtc: header\n")
    script = "import sys, time\nfor i in range(10**6):\n    print(f'line {i}', flush=True)\n"
    script += "    time.sleep(0.02)\n"
    spawned = spawn([sys.executable, "-c", script], {**os.environ, "API_KEY": "sk-zzzzzz"}, log)
    seen: list[str] = []
    link = await OutputLink.open(spawned, seen.append)
    try:
        await until(lambda: len(seen) >= 3, "three lines through the relay")
        assert await link.sync(30) is True  # everything written so far has arrived
        assert not any("vtc-sync" in line for line in seen)
        link.close()  # a detach: stop reading
        count = len(seen)
        size = log.stat().st_size
        await until(lambda: log.stat().st_size > size + 100, "the log to keep growing")
        assert len(seen) == count
        assert log.read_text().startswith("# vtc: header\nline 0\n")
        assert not gone(spawned.relay.pid)
    finally:
        spawned.proc.kill()
        spawned.proc.wait(timeout=10)
    # End of file once the server is gone: the relay ends by itself.
    assert spawned.relay.wait(timeout=30) == 0


async def test_a_failed_launch_leaves_nothing_running(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_text("")
    before = {p.pid for p in _relays(log)}
    with pytest.raises(OSError):
        spawn([str(tmp_path / "no-such-vllm")], dict(os.environ), log)
    await until(lambda: {p.pid for p in _relays(log)} <= before, "the relay to end")


def _relays(log: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "tui.server.relay" in cmd and str(log) in cmd and proc.status() != "zombie":
            found.append(proc)
    return found


async def test_end_of_file_is_noticed(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_text("")
    spawned = spawn([sys.executable, "-c", "print('bye')"], dict(os.environ), log)
    seen: list[str] = []
    link = await OutputLink.open(spawned, seen.append)
    assert await link.drained(30) is True
    assert seen == ["bye"] and link.closed
    assert spawned.proc.wait(timeout=10) == 0
    assert await asyncio.to_thread(spawned.relay.wait, 10) == 0
