"""The report in a real headless Chromium: it renders, and the page attempts no request.

Chromium writes a NetLog of everything its network stack does. Chromium itself talks to
Google in the background (update checks, network time) even with the flags below, so a
request counts as the *page's* when it carries the page's network isolation key
(``file://``: the report is opened from disk). The control test proves the check sees a
page's request; the real test opens the report with its Content-Security-Policy removed,
so it is the content, not the CSP, that fetches nothing.

Skips where Chromium is absent (Debian: ``apt-get install chromium``); with
``VTC_REQUIRE_CHROMIUM=1`` (CI where it is installed) a missing Chromium fails instead.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fakes.runs import failed_run, served_run

from tui.domain.board.view import BoardView, build_board
from tui.domain.workload import LoadSpec
from tui.store.report import CSP, report_html

WINDOW = (1280, 1600)
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
_PAGE_KEYS = ("network_isolation_key", "network_anonymization_key", "group_id")


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def chromium() -> str:
    found = _chromium()
    if found is None:
        reason = "Chromium is not installed (Debian: apt-get install chromium)"
        if os.environ.get("VTC_REQUIRE_CHROMIUM") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


@dataclass
class Opened:
    """What a headless visit left: the screenshot and the page's network attempts."""

    png: bytes
    attempts: list[str]


def _netlog(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8", errors="replace").rstrip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:  # a log cut short still holds whole events: close it
        return json.loads(text.rstrip(",") + "]}")


def page_attempts(netlog: dict[str, Any]) -> list[str]:
    """URLs/hosts of network events made on behalf of a page opened from ``file://``."""
    found = []
    for event in netlog.get("events", []):
        params = event.get("params") or {}
        if any("file://" in str(params.get(k, "")) for k in _PAGE_KEYS):
            found.append(str(params.get("url") or params.get("host") or params.get("group_id")))
    return found


def open_headless(chromium: str, page: Path, work: Path) -> Opened:
    """Open ``page`` in a fresh profile; screenshot it and read the NetLog."""
    work.mkdir(parents=True, exist_ok=True)
    shot, log = work / "shot.png", work / "netlog.json"
    argv = [
        chromium,
        *FLAGS,
        f"--user-data-dir={work / 'profile'}",
        f"--log-net-log={log}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        f"--screenshot={shot}",
        page.as_uri(),
    ]
    # the timeout only stops a hung browser; nothing here depends on how fast it is
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert shot.exists(), f"no screenshot (exit {result.returncode}): {result.stderr[-1500:]}"
    return Opened(shot.read_bytes(), page_attempts(_netlog(log)))


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _report() -> str:
    runs = [
        failed_run(1, max_model_len=30576),
        served_run(2, tput=800, ttft_p99=120, max_num_seqs=256),
        served_run(3, tput=820, ttft_p99=118, max_num_seqs=256),
        served_run(4, tput=950, ttft_p99=180, max_num_seqs=512),
        served_run(5, tput=700, ttft_p99=90, max_num_seqs=128),
        served_run(6, tput=2000, ttft_p99=2500, workload=LoadSpec(num_prompts=200)),
    ]
    board = build_board(runs, BoardView(selected=4))
    return report_html(board, generated=datetime(2026, 1, 2, tzinfo=UTC), source="runs.sqlite")


def test_the_check_sees_a_page_that_fetches(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "fetches.html"
    page.write_text('<!doctype html><p>x</p><img src="http://example.invalid/pixel.png">')
    opened = open_headless(chromium, page, tmp_path)
    assert any("example.invalid" in a for a in opened.attempts), opened.attempts


def test_report_renders_and_attempts_no_request(chromium: str, tmp_path: Path) -> None:
    html = _report()
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    opened = open_headless(chromium, page, tmp_path / "as-written")
    assert opened.attempts == []
    assert png_size(opened.png) == WINDOW
    # a blank page compresses to a few KB; a rendered table and two plots do not
    assert len(opened.png) > 30_000
    shot = os.environ.get("VTC_REPORT_SCREENSHOT")
    if shot:  # for a human to look at
        Path(shot).write_bytes(opened.png)
    # without the CSP nothing would block a fetch: the content itself must not try
    assert CSP in html
    bare = tmp_path / "no-csp.html"
    bare.write_text(html.replace(CSP, "default-src *"), encoding="utf-8")
    assert open_headless(chromium, bare, tmp_path / "no-csp").attempts == []
