"""Attach: watch and load a server at a URL that this console did not start.

Nothing is launched or stopped. The GPU panel shows what can truly be attributed to that
server: DCGM gauges at ``--gpu-metrics-url``; or the server's own /metrics page when it
carries DCGM gauges (the simulator's does); or local NVML, only when the URL is on this
machine. Otherwise the panel says the remote GPU is not visible (and what to pass), and
the run records no GPU numbers: this machine's GPU is never reported as the server's.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import time
import urllib.parse

from tui.domain.credentials import Credentials
from tui.domain.flags import ServeFlags
from tui.domain.telemetry import GpuSample, SourceStatus
from tui.load.runner import LoadRunner
from tui.modes.common import Services, assemble, open_history, starting_point
from tui.modes.options import ConsoleOptions, SetupError
from tui.modes.sources import DcgmReader, HostReader, MetricsReader, NvmlReader, local_client
from tui.server.attached import AttachedServer, attach_url
from tui.session.facade import Session
from tui.session.hub import GpuReader
from tui.session.port import SessionInfo
from tui.session.slot import ServerSlot
from tui.store.console_files import ConsoleFiles
from tui.store.history import default_data_dir
from tui.telemetry.nvml import NvmlGpuSource

ATTACHED_FORM_MODEL = "attached"
NO_FLAG_LIST = "attached: no flag list (this console does not launch vLLM)"
REMOTE_GPU_HINT = "pass --gpu-metrics-url URL (a DCGM exporter on that host)"


def is_local_url(url: str) -> bool:
    """Whether ``url``'s host is this machine (loopback, or one of this host's addresses)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host in ("localhost", socket.gethostname(), socket.getfqdn()):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:  # a name: local when it resolves to an address of this machine
            address = ipaddress.ip_address(socket.gethostbyname(host))
        except (OSError, ValueError):
            return False
    if address.is_loopback:
        return True
    try:
        own = {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        own = set()
    return str(address) in own


def remote_gpu_absent(url: str) -> GpuSample:
    """What the GPU panel says for a server on another host with no GPU source given."""
    host = urllib.parse.urlsplit(url).hostname or url
    return GpuSample(
        t=time.monotonic(),
        source="remote",
        status=SourceStatus.UNAVAILABLE,
        message=f"remote GPU on {host} not visible: {REMOTE_GPU_HINT}",
    )


class AttachMode:
    """Builds a session that watches the server at ``--attach URL``."""

    label = "attach"

    def build(self, options: ConsoleOptions) -> Session:
        """The attached session for ``options``; raises :class:`SetupError` for a bad URL."""
        info, services = self.parts(options)
        return assemble(info, services, poll_interval_s=options.poll_interval_s)

    def parts(self, options: ConsoleOptions) -> tuple[SessionInfo, Services]:
        """What :meth:`build` joins: the session's facts and the adapters it chose."""
        if options.demo:
            raise SetupError("--attach watches a server at a URL", hint="drop --demo")
        assert options.attach is not None
        try:
            url = attach_url(options.attach)
        except ValueError as exc:
            raise SetupError(str(exc)) from exc
        data_dir = options.data_dir or default_data_dir()
        env = dict(os.environ)
        said: list[str] = []
        store, history = open_history(data_dir / "runs.sqlite", said)
        point = starting_point(options, fallback=ServeFlags(model=ATTACHED_FORM_MODEL))
        credentials = Credentials.from_env(env, command_line=point.secrets)
        local = is_local_url(url)
        gpu: GpuReader | None = None
        if options.gpu_metrics_url:
            gpu = DcgmReader(options.gpu_metrics_url, local_client())
        elif local:
            gpu = NvmlReader(NvmlGpuSource())
        services = Services(
            store=store,
            history=history,
            slot=ServerSlot(
                existing=AttachedServer(
                    url, api_key=credentials.api_key, poll_interval_s=options.poll_interval_s
                )
            ),
            metrics=MetricsReader(local_client(credentials)),
            runner=LoadRunner(api_key=credentials.api_key),
            gpu=gpu,
            host=HostReader() if local else None,
            gpu_absent=None if gpu is not None else remote_gpu_absent(url),
            files=ConsoleFiles(data_dir),
        )
        info = SessionInfo(
            label=f"attached: {url}",
            initial_flags=point.flags,
            initial_load=point.load,
            presets=point.presets,
            initial_preset=point.preset.name if point.preset is not None else None,
            notices=[*said, *point.notices],
            executable=url,
            no_flag_list=NO_FLAG_LIST,
        )
        return info, services
