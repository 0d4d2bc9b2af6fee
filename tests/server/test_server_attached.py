"""``vtc --attach URL``: the watcher of a server vtc did not start, alone (a fake /health) and
through the console's own composition against a simulator this test starts itself."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fakes.net import free_port
from fakes.prober import FakeProber
from fakes.waiting import until

from tui.domain.errors import VtcError
from tui.domain.events import Exited, LogLine, Ready, ServerEvent, ServerState
from tui.domain.results import RunStatus
from tui.domain.telemetry import ServerMetrics, SourceStatus
from tui.domain.workload import LoadSpec
from tui.modes import ConsoleOptions, SetupError, build_session
from tui.server.attached import UNKNOWN_MODEL, AttachedServer, attach_url
from tui.server.backend import ATTACHED_REMOTE
from tui.session import SessionEvent, wait_for_state
from tui.store.history import RunStore

MODEL = "meta-llama/Llama-3.2-3B-Instruct"


# -- the URL ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "url"),
    [
        ("http://gpu-box:8000", "http://gpu-box:8000"),
        ("http://gpu-box:8000/", "http://gpu-box:8000"),
        (" https://example.com/vllm/v1/ ", "https://example.com/vllm"),
        ("http://[::1]:8000/v1", "http://[::1]:8000"),
    ],
)
def test_attach_url_is_a_server_base_url(given: str, url: str) -> None:
    assert attach_url(given) == url


@pytest.mark.parametrize(
    "bad", ["gpu-box:8000", "ftp://gpu-box", "http://", "http://h:99999", "http://h:8000/?x=1"]
)
def test_a_bad_attach_url_is_refused_with_the_form_wanted(bad: str) -> None:
    with pytest.raises(ValueError, match="--attach"):
        attach_url(bad)
    with pytest.raises(SetupError, match="--attach"):
        build_session(ConsoleOptions(attach=bad))


def test_attach_does_not_mix_with_the_demo(tmp_path: Path) -> None:
    with pytest.raises(SetupError, match="drop --demo"):
        build_session(ConsoleOptions(demo=True, attach="http://h:8000", data_dir=tmp_path))


# -- the watcher alone ------------------------------------------------------------------------
async def test_transitions_become_ready_and_exited_events() -> None:
    events: list[ServerEvent] = []
    prober = FakeProber(None, ["org/model-a", "lora-b"])
    server = AttachedServer("http://gpu-box:8000/", prober=prober, poll_interval_s=0.02)
    assert server.pid is None and server.base_url == "http://gpu-box:8000"
    takeover = await server.connect(events.append)
    assert server.state is ServerState.STOPPED
    assert takeover.flags.model == UNKNOWN_MODEL  # not answering: no model known yet
    assert takeover.run_id is None and takeover.label == "attached"
    assert events == [] and list(server.log_lines) == []  # connect only looks
    server.watch()
    try:
        await until(lambda: any(isinstance(e, LogLine) for e in events), "a note")
        prober.status = 200
        await until(lambda: any(isinstance(e, Ready) for e in events), "Ready")
        assert server.state is ServerState.READY and server.model == "org/model-a"
        prober.status = 503
        await until(lambda: any(isinstance(e, Exited) for e in events), "Exited")
        assert server.state is ServerState.STOPPED
        prober.status = 200
        await until(lambda: sum(isinstance(e, Ready) for e in events) == 2, "Ready again")
    finally:
        await server.aclose()
    kinds = [type(e).__name__ for e in events if not isinstance(e, LogLine)]
    assert kinds == ["Ready", "Exited", "Ready"]
    assert all(not e.timed for e in events if isinstance(e, Ready))  # not a start we timed
    assert [e for e in events if isinstance(e, Exited)] == [Exited(None, requested=False)]
    notes = "\n".join(server.log_lines)
    assert "no answer" in notes and "HTTP 503" in notes
    assert "serving org/model-a (also lora-b)" in notes
    # each observation is noted once, not every second, and sent once to the console
    assert sum("HTTP 503" in line for line in server.log_lines) == 1
    assert [e.text for e in events if isinstance(e, LogLine)] == list(server.log_lines)


async def test_it_can_be_neither_stopped_nor_detached_and_is_not_local() -> None:
    events: list[ServerEvent] = []
    server = AttachedServer(
        "http://gpu-box:8000", prober=FakeProber(200, ["m"]), poll_interval_s=0.02
    )
    assert server.capabilities == ATTACHED_REMOTE
    assert not (server.capabilities.can_stop or server.capabilities.can_detach)
    assert not server.capabilities.local and server.pids() == set()
    await server.connect(events.append)
    server.watch()
    await until(lambda: any(isinstance(e, Ready) for e in events), "Ready")
    await server.stop()  # nothing: vtc never signals a server it did not start
    assert server.state is ServerState.READY
    assert not any(isinstance(e, Exited) for e in events)
    assert await server.detach() is False
    await server.aclose()
    assert server.state is ServerState.READY  # only the watching ended


async def test_without_a_model_list_the_load_names_an_unknown_model() -> None:
    server = AttachedServer(
        "http://gpu-box:8000", prober=FakeProber(200, None), poll_interval_s=0.02
    )
    assert (await server.connect(lambda e: None)).flags.model == UNKNOWN_MODEL
    assert server.state is ServerState.READY
    server.watch()
    try:
        await until(lambda: any("VLLM_API_KEY" in line for line in server.log_lines), "a note")
    finally:
        await server.aclose()


# -- the console attached to a simulator it did not start -------------------------------------
@pytest.fixture
def sim_server() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``vtc-sim serve`` started here, as somebody else's server; always killed afterwards."""
    port = free_port()
    argv = [sys.executable, "-m", "tui.sim", "serve", MODEL, "--sim-gpu", "h100-80gb"]
    argv += ["--sim-speed", "50", "--port", str(port)]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


async def wait_healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    async with httpx.AsyncClient(trust_env=False, timeout=1.0) as client:
        for _ in range(300):  # about 30 s at most
            assert proc.poll() is None, "the simulator exited"
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url + "/health")).status_code == 200:
                    return
            await asyncio.sleep(0.1)
    raise AssertionError("the simulator never answered /health")


async def test_the_console_attaches_loads_and_never_restarts(
    sim_server: tuple[subprocess.Popen[bytes], str], tmp_path: Path
) -> None:
    proc, url = sim_server
    await wait_healthy(url, proc)
    session = build_session(ConsoleOptions(attach=url, data_dir=tmp_path, poll_interval_s=0.2))
    events: list[SessionEvent] = []
    session.subscribe(events.append)
    assert session.info.label == f"attached: {url}" and not session.can_restart
    await session.start()
    try:
        assert await wait_for_state(session, {ServerState.READY}, 30) is ServerState.READY
        card = session.current
        assert card is not None and card.label == "attached" and card.status is RunStatus.READY
        assert card.flags.model == MODEL  # from /v1/models

        result = await session.run_load(
            LoadSpec(input_len=32, output_len=8, num_prompts=4, max_concurrency=2)
        )
        assert result is not None and result.completed == 4 and result.failed == 0
        assert session.current is not None and session.current.bench == result
        await until(
            lambda: any(
                isinstance(e, ServerMetrics) and e.status is SourceStatus.OK for e in events
            ),
            "a /metrics sample",
        )

        with pytest.raises(VtcError, match="restart disabled"):
            await session.restart(card.flags)
        await session.stop_server()  # an attached server cannot be stopped: nothing happens
        assert proc.poll() is None and session.state is ServerState.READY
        assert not list(tmp_path.glob("*server.json"))  # nothing to reattach: not ours

        proc.send_signal(signal.SIGTERM)  # its owner stops it: the console shows that
        assert await wait_for_state(session, {ServerState.STOPPED}, 30) is ServerState.STOPPED
        assert any(isinstance(e, Exited) and not e.requested for e in events)
    finally:
        await session.close()
    stored = RunStore(tmp_path / "runs.sqlite").list()
    # Its owner stopped it: the card says so (never READY for a server that is gone).
    assert [(r.label, r.status) for r in stored] == [("attached", RunStatus.STOPPED)]
    assert stored[0].bench is not None and stored[0].bench.completed == 4


async def test_closing_an_attached_console_leaves_the_server_alone(
    sim_server: tuple[subprocess.Popen[bytes], str], tmp_path: Path
) -> None:
    proc, url = sim_server
    await wait_healthy(url, proc)
    session = build_session(ConsoleOptions(attach=url, data_dir=tmp_path, poll_interval_s=0.2))
    await session.start()
    assert await wait_for_state(session, {ServerState.READY}, 30) is ServerState.READY
    assert await session.detach() is False  # a hang-up: nothing of ours to leave running
    session.abandon()  # the crash backstop has no pid to kill either
    await wait_healthy(url, proc)  # it answers after both: it was left alone
