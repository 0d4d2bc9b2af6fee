"""An in-process simulator (``SimServer`` on a free port) with an HTTP client, for tests."""

from __future__ import annotations

import asyncio
import io
import socket

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tui.sim.argv import parse_command
from tui.sim.logs import VllmLog
from tui.sim.server import SimServer


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Running:
    """An in-process simulator and an HTTP client for it."""

    def __init__(
        self,
        server: SimServer,
        task: asyncio.Task[int],
        base: str,
        out: io.StringIO,
        err: io.StringIO,
    ) -> None:
        self.server, self.task, self.base, self.out, self.err = server, task, base, out, err
        self.client = httpx.AsyncClient(base_url=base, timeout=30)

    async def metrics(self) -> dict[str, float]:
        """Every sample of /metrics by name (label sets summed)."""
        text = (await self.client.get("/metrics")).text
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                out[sample.name] = out.get(sample.name, 0.0) + sample.value
        return out

    async def close(self) -> int:
        """Stop the server (as SIGTERM would) and the client; the exit code."""
        self.server.request_stop()
        try:
            return await asyncio.wait_for(self.task, 30)
        finally:
            await self.client.aclose()


async def start_sim(model: str, *flags: str) -> Running:
    """Start ``vtc-sim serve MODEL FLAGS`` in this event loop; returns once /health is 200."""
    port = free_port()
    command = parse_command([model, "--host", "127.0.0.1", "--port", str(port), *flags])
    out, err = io.StringIO(), io.StringIO()
    log = VllmLog(out, err, version=command.sim.vllm_version)
    server = SimServer(command, log, install_signals=False)
    task = asyncio.create_task(server.run())
    running = Running(server, task, f"http://127.0.0.1:{port}", out, err)
    while True:
        if task.done():
            await running.client.aclose()
            raise AssertionError(f"server exited {task.result()}: {err.getvalue()[-3000:]}")
        try:
            if (await running.client.get("/health")).status_code == 200:
                return running
        except httpx.TransportError:
            await asyncio.sleep(0.01)
