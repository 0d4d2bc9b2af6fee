"""A serving server that stops answering: ``/health`` with a deadline while it serves
(issue 17: a SIGSTOPped server read a green READY), and a stop that still ends it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

from fakes.net import free_port
from fakes.prober import FakeProber
from fakes.waiting import Recorder, until

from tui.domain.events import Answered, Exited, ServerState, Unanswered
from tui.domain.flags.serve import ServeFlags
from tui.server.health_watch import HealthWatch
from tui.server.launcher import ProcessLauncher

FAKE = Path(__file__).resolve().parent / "fake_vllm.py"


class HangingProber(FakeProber):
    """``/health`` never answers while ``hang`` is set (a stopped process's socket)."""

    def __init__(self) -> None:
        super().__init__(200)
        self.hang = False

    async def health(self, url: str) -> int | None:
        if self.hang:
            await asyncio.Event().wait()
        return await super().health(url)


async def test_silence_is_reported_after_the_misses_and_recovery_once() -> None:
    prober = HangingProber()
    seen = Recorder()
    watch = HealthWatch(prober, "http://x", seen, interval_s=0.01, deadline_s=0.05, misses=2)
    task = asyncio.ensure_future(watch.run())
    try:
        await until(lambda: prober.calls >= 3, "answered probes")
        assert seen.events == []  # answering: nothing to say
        prober.hang = True
        await until(lambda: bool(seen.of(Unanswered)), "the silence")
        first = seen.of(Unanswered)[0]
        assert "within 0.05 s" in first.reason and first.silent_s > 0
        await until(lambda: len(seen.of(Unanswered)) >= 2, "the silence growing")
        assert seen.of(Unanswered)[-1].silent_s >= first.silent_s
        prober.hang = False
        await until(lambda: bool(seen.of(Answered)), "the answer again")
        prober.status = 503
        await until(lambda: "HTTP 503" in seen.of(Unanswered)[-1].reason, "a refusing /health")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_sigstopped_server_is_reported_unanswered_and_stop_still_ends_it(
    tmp_path: Path,
) -> None:
    launcher = ProcessLauncher(
        [sys.executable, str(FAKE), "--health-after", "0"],
        log_dir=tmp_path,
        startup_timeout_s=60.0,
        grace_s=0.3,
        poll_interval_s=0.05,
        health_interval_s=0.05,
    )
    rec = Recorder()
    flags = ServeFlags(model="/models/tiny-llama", host="127.0.0.1", port=free_port())
    server = await launcher.launch(flags, rec)
    try:
        assert await server.wait_settled(30) is ServerState.READY
        assert server.pid is not None
        os.killpg(server.pid, signal.SIGSTOP)
        await until(lambda: bool(rec.of(Unanswered)), "the hung server reported", 60)
        assert server.state is ServerState.READY  # alive: the state says so, the event why
        await server.stop()  # SIGTERM is held by a stopped process: SIGKILL after the grace
        assert server.state is ServerState.STOPPED
        assert isinstance(rec.events[-1], Exited)
        with contextlib.suppress(ProcessLookupError):
            os.kill(server.pid, 0)
            raise AssertionError("the stopped server survived the stop")
    finally:
        if server.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(server.pid, signal.SIGKILL)
        await launcher.aclose()
