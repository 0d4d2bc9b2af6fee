"""Attach, as an operator meets it at 80x24: a server somebody started with
``--max-model-len 4096 --quantization fp8`` (its log redirected to a file), then
``vtc --attach URL --attach-log FILE``. The form reads what the server runs, read-only and
marked as read from it; the key bar offers no restart, fix or stop."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from fakes.net import free_port
from textual.pilot import Pilot
from textual.widgets import Input, Static

from tui.modes import ConsoleOptions, build_session
from tui.ui.app import create_app
from tui.ui.widgets.flag_field import FlagField

# slow tier: the console attached to a simulator process.
pytestmark = pytest.mark.slow

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
LAUNCHING = {"restart", "fix", "stop_server", "sweep", "repeat", "load_run"}


@pytest.fixture
def started_elsewhere(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``vtc-sim serve MODEL --max-model-len 4096 --quantization fp8 > server.log 2>&1``."""
    port = free_port()
    log = tmp_path / "server.log"
    argv = [
        sys.executable,
        "-m",
        "tui.sim",
        "serve",
        MODEL,
        "--max-model-len",
        "4096",
        "--quantization",
        "fp8",
        "--sim-gpu",
        "h100-80gb",
        "--sim-speed",
        "50",
        "--port",
        str(port),
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):  # bounded: about a minute on a busy machine
            assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/health", timeout=1.0, trust_env=False).status_code == 200:
                    break
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.1)
        else:
            raise AssertionError("the simulator never answered /health")
        yield url, log
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


async def until(pilot: Pilot[None], done: Callable[[], bool], what: str) -> None:
    for _ in range(600):
        if done():
            return
        await pilot.pause(0.1)
    raise AssertionError(f"gave up waiting for {what}")


@pytest.mark.parametrize("with_log", [True, False], ids=["with-log", "without-log"])
async def test_the_attached_form_reads_what_the_server_runs(
    started_elsewhere: tuple[str, Path], tmp_path: Path, with_log: bool
) -> None:
    url, log = started_elsewhere
    options = ConsoleOptions(
        attach=url,
        attach_log=log if with_log else None,
        data_dir=tmp_path / "data",
        poll_interval_s=0.2,
    )
    session = build_session(options)
    app = create_app(session, clock=None)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            form = app.main_screen.form
            await until(pilot, lambda: form.field("max_model_len").value == "4096", "the form read")
            config = session.server_config
            assert config is not None and not config.notes, config
            assert form.field("model").value == MODEL
            assert form.border_title is not None and "read from the server" in form.border_title
            max_len = form.field("max_model_len")
            assert max_len.editor.disabled and _source(max_len) == "← api"
            assert _source(form.field("block_size")) == "← metrics"
            legend = str(form.query_one("#form-source", Static).render())
            assert "←api /v1/models" in legend and "←metrics /metrics" in legend
            quant = form.field("quantization")
            editor = quant.editor
            assert editor.disabled
            if with_log:
                assert quant.value == "fp8" and _source(quant) == "← log"
                assert "←log its log" in legend and "blank: vLLM's default" in legend
            else:  # vLLM 0.32's /metrics does not say: the form says it does not know
                assert quant.value == "" and isinstance(editor, Input)
                assert editor.placeholder == "not known" and "blank: not known" in legend
            offered = {b.binding.action for b in app.screen.active_bindings.values()}
            assert not offered & LAUNCHING and "bench" in offered
            # the run's record takes the read flags on the session's own turn (after the form)
            await until(
                pilot,
                lambda: session.current is not None and session.current.flags.max_model_len == 4096,
                "the run's card read",
            )
    finally:
        await session.close()


def _source(field: FlagField) -> str:
    hints = list(field.query(".field-source").results())
    return " ".join(str(h.render()) for h in hints)
