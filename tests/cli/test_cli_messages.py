"""The ``vtc`` command's closing lines: what a detach and a sweep say when they end."""

from __future__ import annotations

from tui.app.cli import detached_message
from tui.session.slot import LeftRunning


def test_a_detach_names_the_pid_and_url_of_the_server_it_left_running() -> None:
    text = detached_message(LeftRunning(pid=4242, base_url="http://127.0.0.1:8123"), demo=True)
    assert "pid 4242" in text and "http://127.0.0.1:8123" in text
    assert "`vtc --demo` reattaches" in text and "`vtc stop --demo` stops it" in text
    assert "None" not in text


def test_a_detach_that_knows_nothing_says_no_pid_rather_than_none() -> None:
    text = detached_message(None, demo=False)
    assert "None" not in text and "the server keeps running" in text
    assert "`vtc stop` stops it" in text
