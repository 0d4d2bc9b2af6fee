"""Text from outside is inert wherever it is shown (issue 18, item 1).

A server's log, a model id, a metric label, an error body may carry terminal escapes: an
OSC 52 clipboard write, an OSC 0/2 title, DCS/APC/PM/SOS strings, CSI, their 8-bit C1
forms. The sanitiser (:func:`tui.domain.inert.inert`) removes them all; property tests
generate hostile strings. Then the boundaries, with real processes and a real terminal
(tmux): a server whose log retitles the terminal and writes its clipboard leaves both as
they were, in the console and through ``vtc diagnose``.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from fakes.waiting import tmux_leave_field, until_blocking
from hypothesis import example, given, settings
from hypothesis import strategies as st
from property_profiles import examples

from tui.app.output import InertWriter
from tui.domain.inert import inert, inert_lines
from tui.server.logbuffer import clean_line

ROOT = Path(__file__).resolve().parents[2]

# Pieces a hostile string is made of: introducers (7- and 8-bit), terminators, payloads.
_PIECES = st.sampled_from(
    [
        "\x1b",
        "\x1b[",
        "\x1b]",
        "\x1bP",
        "\x1b_",
        "\x1b^",
        "\x1bX",
        "\x1b\\",
        "\x07",
        "\x9b",
        "\x9d",
        "\x90",
        "\x9c",
        "\x9e",
        "\x9f",
        "\x98",
        "\x85",
        "\r",
        "\n",
        "\t",
        "\x00",
        "\x7f",
        "]52;c;aGFja2Vk",
        "0;PWNED",
        "2J",
        "[31m",
        "?1049h",
        "\u202e",
        "\u2028",
        "[b]x[/b]",
        "é",
    ]
)
HOSTILE = st.lists(st.one_of(_PIECES, st.text(max_size=8)), max_size=30).map("".join)
OSC52 = "\x1b]52;c;aGFja2Vk\x07"
TITLE = "\x1b]0;PWNED\x1b\\"


def _has_control(text: str, allowed: str = "") -> bool:
    return any(
        (ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or 0x202A <= ord(c) <= 0x202E) and c not in allowed
        for c in text
    )


@settings(max_examples=examples(400), deadline=None)
@given(HOSTILE)
@example(f"prompt {OSC52} then {TITLE} end")
@example("\x9d52;c;aGk=\x9cplain")
@example("\x1bP+q544e\x1b\\ \x1b_apc\x07 \x1b^pm\x1b\\ \x1bXsos\x9c")
def test_no_escape_and_no_control_survives(text: str) -> None:
    one = inert(text)
    assert "\x1b" not in one and not _has_control(one)
    lines = inert_lines(text)
    assert "\x1b" not in lines and not _has_control(lines, allowed="\t\n")
    assert inert(one) == one  # idempotent: what is clean stays as it is
    logged = clean_line(text + "\n")  # what the log tail and the log file keep
    assert "\x1b" not in logged and not _has_control(logged, allowed="\t")


@settings(max_examples=examples(200), deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cf", "Zl", "Zp"))))
def test_printable_text_is_kept_whole(text: str) -> None:
    assert inert(text) == text


def test_a_sequence_payload_is_dropped_with_it() -> None:
    assert inert(f"a{OSC52}b{TITLE}c") == "abc"
    assert inert("x\x1b]52;c;unterminated payload") == "x"  # never half shown
    assert inert("\x1b[1;31mred\x1b[0m") == "red"


def test_a_sequence_split_over_two_writes_cannot_be_completed() -> None:
    raw = io.StringIO()
    out = InertWriter(raw)  # type: ignore[arg-type]
    for chunk in ("\x1b", "]52;c;aGk=", "\x07", "\x9b", "2J", "ok\n"):
        out.write(chunk)
    assert "\x1b" not in raw.getvalue() and not _has_control(raw.getvalue(), "\n")


def test_vtc_diagnose_writes_a_hostile_log_inert(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        f"INFO model {OSC52}x\nValueError: broke {TITLE} \x9b2J here\n", encoding="utf-8"
    )
    done = subprocess.run(
        [sys.executable, "-m", "tui.cli", "diagnose", str(log)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode in (0, 1), done.stderr
    for stream in (done.stdout, done.stderr):
        assert "\x1b" not in stream and not _has_control(stream, "\n")
    assert "broke" in done.stdout


FAKE_VLLM = """#!/bin/sh
printf 'INFO starting\\n'
printf 'INFO prompt: \\033]52;c;aGFja2Vk\\007 and \\033]0;PWNED\\033\\\\ title\\n'
printf 'ValueError: something broke \\033]2;OWNED\\007 here \\2332J\\n'
exit 1
"""


def _tmux(socket: str, *args: str) -> str:
    return subprocess.run(
        ["tmux", "-L", socket, *args], capture_output=True, text=True, timeout=30
    ).stdout


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_a_server_log_cannot_retitle_the_terminal_or_write_its_clipboard(tmp_path: Path) -> None:
    fake = tmp_path / "vllm"
    fake.write_text(FAKE_VLLM)
    fake.chmod(0o755)
    socket = f"i18-{uuid.uuid4().hex[:8]}"
    env = f"PYTHONPATH={ROOT} VTC_DATA_DIR={tmp_path / 'data'}"
    console = f"env {env} {sys.executable} -m tui.cli --vllm {fake} -- serve facebook/opt-125m"
    _tmux(socket, "-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "120", "-y", "40")
    try:
        _tmux(socket, "set", "-g", "set-clipboard", "on")
        _tmux(socket, "select-pane", "-t", "t", "-T", "vtc-test")
        _tmux(socket, "send-keys", "-t", "t", console, "Enter")
        shown = lambda: _tmux(socket, "capture-pane", "-p", "-t", "t")  # noqa: E731
        until_blocking(lambda: "Flags" in shown(), shown, 90)
        tmux_leave_field(["tmux", "-L", socket], "t", shown)
        _tmux(socket, "send-keys", "-t", "t", "r")
        until_blocking(lambda: "something broke" in shown(), shown, 90)
        until_blocking(lambda: "FAILED" in shown(), shown, 30)
        screen = shown()
        assert "PWNED" not in screen and "OWNED" not in screen and "aGFja2Vk" not in screen
        assert _tmux(socket, "display", "-p", "-t", "t", "#{pane_title}").strip() == "vtc-test"
        assert _tmux(socket, "show-buffer").strip() == ""  # nothing reached the clipboard
    finally:
        _tmux(socket, "kill-server")
