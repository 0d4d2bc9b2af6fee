"""A real ``python -m tui.sim serve`` subprocess, driven the way the console drives vLLM."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx

START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class SimProcess:
    """The subprocess and every line it printed (stdout and stderr merged)."""

    proc: subprocess.Popen[str]
    base: str
    lines: list[str] = field(default_factory=list)
    _q: queue.Queue[str | None] = field(default_factory=queue.Queue)
    _client: httpx.Client | None = None

    def pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._q.put(line.rstrip("\n"))
        self._q.put(None)

    def wait_for(self, text: str, timeout: float = START_TIMEOUT) -> str:
        """Read lines until one contains ``text``."""
        for line in self.lines:
            if text in line:
                return line
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                item = self._q.get(timeout=0.1)
            except queue.Empty:
                continue
            if item is None:
                break
            self.lines.append(item)
            if text in item:
                return item
        raise AssertionError(f"{text!r} not seen; output:\n" + "\n".join(self.lines[-40:]))

    def drain(self) -> None:
        while True:
            try:
                item = self._q.get(timeout=0.5)
            except queue.Empty:
                return
            if item is None:
                return
            self.lines.append(item)

    @property
    def client(self) -> httpx.Client:
        """A client kept for the process's life (``httpx.post`` builds one per call: slow)."""
        if self._client is None:
            self._client = httpx.Client(base_url=self.base, timeout=30)
        return self._client

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Wait until /health answers 200."""
        self.wait_for("Application startup complete.", timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                if self.client.get("/health").status_code == 200:
                    return
            time.sleep(0.05)
        raise AssertionError("/health never answered 200")


@contextlib.contextmanager
def sim_process(model: str, *flags: str, env: dict[str, str] | None = None) -> Iterator[SimProcess]:
    """``python -m tui.sim serve MODEL --host 127.0.0.1 --port P FLAGS`` in its own session."""
    port = free_port()
    argv = [sys.executable, "-m", "tui.sim", "serve", model, "--host", "127.0.0.1"]
    argv += ["--port", str(port), *flags]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    sim = SimProcess(proc, f"http://127.0.0.1:{port}")
    threading.Thread(target=sim.pump, daemon=True).start()
    try:
        yield sim
    finally:
        if sim._client is not None:
            sim._client.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
