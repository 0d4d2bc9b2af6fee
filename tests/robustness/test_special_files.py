"""Only regular files are read; names of any length never crash a lookup (issue 18, item 3).

A FIFO named ``*.toml`` in the presets folder used to hang ``vtc presets``; a model id
over 255 bytes crashed ``vtc bench`` (``OSError: [Errno 36] File name too long`` looking
for a local tokenizer), also when the server's ``/v1/models`` named it. Real FIFOs,
directories and device links, real processes (each bounded by a timeout: a hang fails the
test instead of hanging it), a real HTTP server.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_profiles import examples

from tui.load.tokenizer import hub_snapshot, load_tokenizer
from tui.server.model_config import find_model_config
from tui.store.console_files import read_tail
from tui.store.hf_cache import find_snapshot_file
from tui.store.regular_file import NotRegularFileError, is_regular_file, read_regular_text

# slow tier: each case runs the vtc command line in a process of its own.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GOOD_PRESET = 'name = "good-one"\ndescription = "d"\nsource = "s"\nmodel = "m/x"\n'


def _vtc(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdin=subprocess.DEVNULL,
    )


def _specials(folder: Path, suffix: str) -> list[Path]:
    """A FIFO, a directory and a link to a device, each named like the real thing."""
    folder.mkdir(parents=True, exist_ok=True)
    fifo, directory, device = (folder / f"{n}{suffix}" for n in ("fifo", "dir", "device"))
    os.mkfifo(fifo)
    directory.mkdir()
    device.symlink_to("/dev/zero")
    return [fifo, directory, device]


def test_vtc_presets_skips_fifos_devices_and_directories_with_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "config" / "vtc" / "presets"
    specials = _specials(folder, ".toml")
    (folder / "good.toml").write_text(GOOD_PRESET)
    done = _vtc("presets", env={"XDG_CONFIG_HOME": str(tmp_path / "config")})
    assert done.returncode == 1 and "good-one" in done.stdout, done.stderr
    errors = done.stderr.strip().splitlines()
    assert len(errors) == len(specials) and "Traceback" not in done.stderr
    for path in specials:
        assert any(str(path) in e and "not a regular file" in e for e in errors), errors


@pytest.mark.parametrize("kind", ["fifo", "dir", "device"])
def test_a_sweep_spec_that_is_not_a_file_is_refused_with_one_line(
    tmp_path: Path, kind: str
) -> None:
    path = next(p for p in _specials(tmp_path / "specs", ".toml") if p.stem == kind)
    done = _vtc("sweep", str(path), "--demo", env={"VTC_DATA_DIR": str(tmp_path / "d")})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "not a regular file" in done.stderr


@pytest.mark.parametrize("kind", ["fifo", "dir", "device"])
def test_a_config_that_is_not_a_file_is_refused_with_one_line(tmp_path: Path, kind: str) -> None:
    path = next(p for p in _specials(tmp_path / "cfg", ".yaml") if p.stem == kind)
    done = _vtc("--demo", "--config", str(path), env={"VTC_DATA_DIR": str(tmp_path / "d")})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and "not a regular file" in done.stderr


def test_a_log_in_a_fifos_place_is_a_note_not_a_hang(tmp_path: Path) -> None:
    fifo, directory, device = _specials(tmp_path / "logs", ".log")
    for path in (fifo, directory, device):
        tail = read_tail(path)
        assert tail.lines == () and "not a regular file" in tail.note
    with pytest.raises(NotRegularFileError):
        read_regular_text(fifo)


LONG_IDS = ["m" * 300, "org/" + "m" * 300, "a/" * 3000, "x" * 5000 + "/y"]


class _ModelsHandler(http.server.BaseHTTPRequestHandler):
    model_id = ""

    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": self.model_id}]}).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def models_server() -> Iterator[tuple[str, type[_ModelsHandler]]]:
    handler = type("Handler", (_ModelsHandler,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("model", LONG_IDS[:2])
def test_vtc_bench_with_a_long_model_id_given_or_served_does_not_crash(
    models_server: tuple[str, type[_ModelsHandler]], model: str
) -> None:
    url, handler = models_server
    handler.model_id = model
    for args in (["--model", model], []):  # named by the operator, then by /v1/models
        done = _vtc("bench", "--base-url", url, *args, "--num-prompts", "2")
        assert "Traceback" not in done.stderr and "File name too long" not in done.stderr, (
            done.stderr[-2000:]
        )


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.sampled_from(LONG_IDS),
        st.text(min_size=1, max_size=700),
        st.builds(lambda a, b: f"{a}/{b}", st.text(min_size=200), st.text(min_size=200)),
    )
)
def test_any_model_id_is_looked_up_without_raising(model: str) -> None:
    assert load_tokenizer(model)[1]  # a description, the approximate one at worst
    hub_snapshot(model)
    find_snapshot_file(model, "config.json")
    found = find_model_config(model)
    assert found.shape is None or found.model == model
    assert is_regular_file(model) in (True, False)
