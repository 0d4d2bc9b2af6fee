"""The calibrate mode: the server ``vtc calibrate`` measures, launched or attached.

Built like the console's modes: the launcher, its pre-flight estimator and the GPU (NVML
here, or the CPU build's NUMA node) come from :mod:`tui.modes.adapters`. A launched server
runs in its own session like the console's (its log in ``<data dir>/logs``) and is stopped
when the calibration ends, however it ends; an attached one is only read and loaded (its
flags as the console reads them: ``/v1/models``, ``vllm:cache_config_info``, and the
startup log when one is named).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tui.domain.credentials import Credentials
from tui.domain.events import Failed, Ready
from tui.domain.flags.serve import ServeFlags
from tui.domain.url_credentials import UrlCredential, split_url
from tui.load.runner import LoadRunner
from tui.modes import adapters
from tui.modes.common import free_port
from tui.modes.options import SetupError
from tui.modes.sources import local_client
from tui.server.attached import attach_url
from tui.server.attached_config import AttachedConfigReader
from tui.server.launched import LaunchedServer
from tui.server.log_excerpt import log_text
from tui.store.bounded_read import UntrustedFileError, require_regular_file
from tui.twin.calibrate import CalibrationError


@dataclass
class AttachedTarget:
    """A server somebody else started: read and loaded, never stopped."""

    base_url: str
    flags: ServeFlags
    credentials: Credentials
    credential: UrlCredential | None = None
    log_path: Path | None = None

    def client(self) -> httpx.AsyncClient:
        """A client with the console's credentials."""
        return local_client(self.credentials, url_credential=self.credential)

    def load_runner(self) -> LoadRunner:
        """The loads' engine, sending the same credentials as :meth:`client`."""
        return calibration_runner(self.credentials, self.credential)

    def log_text(self) -> str:
        """The named startup log's head and tail ("" without one)."""
        return log_text(self.log_path)


@dataclass
class LaunchedTarget:
    """A server this calibration launched (stopped when it ends)."""

    server: LaunchedServer
    credentials: Credentials
    flags: ServeFlags
    failures: list[str] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        """Where it answers."""
        return self.server.base_url

    def client(self) -> httpx.AsyncClient:
        """A client with the server's key."""
        return local_client(self.credentials)

    def load_runner(self) -> LoadRunner:
        """The loads' engine, sending the server's key."""
        return calibration_runner(self.credentials, None)

    def log_text(self) -> str:
        """Its log file so far."""
        return log_text(self.server.log_path)


def calibration_runner(credentials: Credentials, credential: UrlCredential | None) -> LoadRunner:
    """``vtc bench``'s engine with the one credential rule: the key every page read sends
    (the serve line's ``--api-key`` > ``VLLM_API_KEY`` > ``OPENAI_API_KEY``) goes with
    every load request too."""
    return LoadRunner(client="vtc-bench", api_key=credentials.api_key, credential=credential)


async def attached(url: str, log_path: Path | None) -> AttachedTarget:
    """The server at ``url`` (its flags read as ``vtc --attach`` reads them); ``log_path``
    refused at once unless it is a regular file (a FIFO would be waited on)."""
    if log_path is not None:
        try:
            require_regular_file(log_path, "--attach-log")
        except UntrustedFileError as exc:
            raise SetupError(exc.message) from None
    base, credential = split_url(attach_url(url))
    credentials = Credentials.from_env(dict(os.environ))
    reader = AttachedConfigReader(
        lambda: local_client(credentials, url_credential=credential), log_path=log_path
    )
    config = await reader.read(base, fallback_model="model")
    return AttachedTarget(base, config.flags, credentials, credential, log_path)


@asynccontextmanager
async def launched(
    vllm: str,
    flags: ServeFlags,
    data_dir: Path,
    *,
    startup_timeout_s: float,
    secrets: Mapping[str, str] | None = None,
) -> AsyncIterator[LaunchedTarget]:
    """``vllm serve`` with ``flags`` on this machine, ready; stopped on the way out.

    ``secrets``: those taken out of the serve line (``--api-key`` as ``VLLM_API_KEY``): the
    server gets them in its environment, the page reads and loads send them."""
    resolved = shutil.which(vllm)
    if resolved is None:
        raise SetupError(
            f"vllm executable not found: {vllm!r}",
            hint="pass --vllm PATH, or run `vtc setup-cpu-vllm` for the CPU build",
        )
    env = dict(os.environ)
    credentials = Credentials.from_env(env, command_line=secrets)
    nvml = adapters.local_gpu(resolved)
    visible = env.get("CUDA_VISIBLE_DEVICES")
    server_env = {**credentials.server_env(), "VLLM_SERVER_DEV_MODE": "1"}
    launcher = adapters.machine(
        [resolved],
        device=adapters.device_memory(nvml=nvml, visible=visible),
        env=server_env,
        inherited=env,
        log_dir=data_dir / "logs",
        startup_timeout_s=startup_timeout_s,
    ).launcher
    if flags.port is None:
        flags = flags.replace(port=free_port())  # through validation, as every fix
    outcome: asyncio.Future[Ready | Failed] = asyncio.get_running_loop().create_future()

    def on_event(event: object) -> None:
        if isinstance(event, Ready | Failed) and not outcome.done():
            outcome.set_result(event)

    server = await launcher.launch(flags, on_event)
    try:
        first = await outcome
        if isinstance(first, Failed):
            raise CalibrationError(f"the server did not start: {first.diagnosis.summary}")
        yield LaunchedTarget(server, credentials, flags)
    finally:
        await server.stop()
        await launcher.aclose()
