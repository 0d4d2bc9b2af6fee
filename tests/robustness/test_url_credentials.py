"""Credentials in URLs and private files (issue 18, item 4).

``vtc top http://user:pass@host:port`` printed the password in its down message; ``vtc
--attach`` with such a URL showed it and stored it in the history, which was 0644. Now the
user and password are taken out of every URL the operator gives (attach, top, bench, the
DCGM URL), sent as ``Authorization: Basic``, and never printed, shown or stored; history,
state, log and journal files are created 0600 in 0700 folders. Real sockets (a server
that records the header it got), real processes, real files.
"""

from __future__ import annotations

import asyncio
import base64
import http.server
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fakes.net import free_port
from hypothesis import given
from hypothesis import strategies as st

from tui.domain.url_credentials import redact_urls, split_url
from tui.modes.attach import AttachMode
from tui.modes.options import ConsoleOptions
from tui.server.logbuffer import LogBuffer
from tui.store.history import RunStore

# slow tier: vtc top and vtc bench as processes against a server.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
USER, PASSWORD = "ops", "s3cret-Pw%40x"  # percent-encoded '@' in the URL
PLAIN_PASSWORD = "s3cret-Pw@x"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PLAIN_PASSWORD}".encode()).decode()
METRICS = b'# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 0\n'


@dataclass
class Seen:
    """What the server was sent."""

    authorizations: list[str] = field(default_factory=list)


def _handler(seen: Seen) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.authorizations.append(self.headers.get("Authorization", ""))
            if self.headers.get("Authorization") != BASIC:
                body, code = b"unauthorized", 401
            elif self.path.startswith("/v1/models"):
                body, code = b'{"object":"list","data":[{"id":"m","root":"m"}]}', 200
            elif self.path.startswith("/metrics"):
                body, code = METRICS, 200
            else:
                body, code = b'{"error": "nope"}', 500
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[str, Seen]]:
    seen = Seen()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(seen))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def _vtc(*args: str, data: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "VTC_DATA_DIR": str(data)},
        stdin=subprocess.DEVNULL,
    )


def _no_password(text: str) -> None:
    for secret in (PASSWORD, PLAIN_PASSWORD, "s3cret"):
        assert secret not in text, text[-2000:]


def test_vtc_top_sends_basic_and_never_prints_the_password(
    server: tuple[str, Seen], tmp_path: Path
) -> None:
    hostport, seen = server
    done = _vtc("top", f"http://{USER}:{PASSWORD}@{hostport}", "--once", "--json", data=tmp_path)
    _no_password(done.stdout + done.stderr)
    assert seen.authorizations and set(seen.authorizations) == {BASIC}
    dead = f"http://{USER}:{PASSWORD}@127.0.0.1:{free_port()}"  # the down message
    gone = _vtc("top", dead, "--once", "--deadline", "3", "--gpu-metrics-url", dead, data=tmp_path)
    assert gone.returncode == 1
    _no_password(gone.stdout + gone.stderr)


def test_vtc_bench_sends_basic_and_never_prints_the_password(
    server: tuple[str, Seen], tmp_path: Path
) -> None:
    hostport, seen = server
    done = _vtc(
        "bench",
        "--base-url",
        f"http://{USER}:{PASSWORD}@{hostport}",
        "--num-prompts",
        "2",
        "--save-result",
        "--result-dir",
        str(tmp_path / "results"),
        data=tmp_path,
    )
    _no_password(done.stdout + done.stderr)
    for path in (tmp_path / "results").rglob("*") if (tmp_path / "results").exists() else ():
        if path.is_file():
            _no_password(path.read_text(errors="replace"))
    assert len(seen.authorizations) >= 3 and set(seen.authorizations) == {BASIC}


def test_attach_shows_and_stores_the_clean_url_and_probes_with_basic(
    server: tuple[str, Seen], tmp_path: Path
) -> None:
    hostport, seen = server
    url = f"http://{USER}:{PASSWORD}@{hostport}"
    options = ConsoleOptions(attach=url, data_dir=tmp_path / "data", autostart=False)
    info, services = AttachMode().parts(options)
    assert info.label == f"attached: http://{hostport}" and info.executable == f"http://{hostport}"
    _no_password(repr(info) + repr(services))

    async def probe() -> None:
        try:
            takeover = await services.slot.take_over()  # /health and /v1/models, with Basic
            assert takeover is not None
            _no_password(repr(takeover))
            services.metrics.target(f"http://{hostport}")  # type: ignore[attr-defined]
            _no_password(repr(await services.metrics.sample()))  # type: ignore[attr-defined]
        finally:
            await services.metrics.aclose()  # type: ignore[attr-defined]
            await services.slot.detach()

    asyncio.run(probe())
    assert seen.authorizations and set(seen.authorizations) == {BASIC}
    services.store.close()
    for path in (tmp_path / "data").rglob("*"):
        if path.is_file():
            _no_password(path.read_bytes().decode("latin-1"))


_USERINFO_CHARS = st.characters(
    blacklist_characters="/?#@%:[]\\", blacklist_categories=("Cc", "Cs", "Zl", "Zp", "Zs")
)


@given(st.text(_USERINFO_CHARS, min_size=1), st.text(_USERINFO_CHARS, min_size=4))
def test_any_userinfo_is_taken_out_of_a_url(user: str, password: str) -> None:
    url = f"https://{user}:{password}@gpu-box.example:8443/v1"
    clean, credential = split_url(url)
    assert clean == "https://gpu-box.example:8443/v1"
    assert credential is not None and (credential.user, credential.password) == (user, password)
    assert password not in repr(credential)
    assert redact_urls(f"cannot reach {url}: refused") == f"cannot reach {clean}: refused"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_history_state_and_log_files_are_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        data = tmp_path / "fresh" / "data"
        store = RunStore(data / "runs.sqlite")
        store.close()
        log = LogBuffer(path=data / "logs" / "run-1.log")
        log.append("a line")
        log.close()
    finally:
        os.umask(old)
    assert _mode(data / "runs.sqlite") == 0o600
    assert _mode(data / "logs" / "run-1.log") == 0o600
    assert _mode(data) == 0o700 and _mode(data / "logs") == 0o700
    loose = tmp_path / "old" / "runs.sqlite"  # a history from before: narrowed on open
    loose.parent.mkdir()
    loose.touch(mode=0o644)
    os.chmod(loose, 0o644)
    RunStore(loose).close()
    assert _mode(loose) == 0o600
