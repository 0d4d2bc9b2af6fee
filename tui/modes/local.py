"""Local vLLM: the console launches ``vllm serve`` on this machine and watches its GPU.

The GPU is local NVML (one source instance, shared by the panel, the pre-flight estimate
and the wait for a stopped server's GPU memory), or a DCGM exporter at
``--gpu-metrics-url``. The CPU build of vLLM estimates against NUMA node 0's memory as
vLLM's CPU worker reads it. The installed vLLM's own flag list is read in the background.

With no model named, a server a previous console left running (the state file) is adopted
and the form starts from its flags: plain ``vtc`` reattaches.
"""

from __future__ import annotations

import functools
import os
import shutil

from tui.domain.credentials import Credentials
from tui.domain.flags.serve import ServeFlags
from tui.modes import adapters
from tui.modes.common import (
    Services,
    assemble,
    check_serve_line,
    free_port,
    named_start,
    open_history,
    reattach,
    resume_form,
    starting_point,
)
from tui.modes.launching import launching_services
from tui.modes.options import ConsoleOptions, SetupError
from tui.modes.sources import LocalGpu
from tui.server.introspect import (
    introspect_vllm,
    python_for_vllm,
)
from tui.session.facade import Session
from tui.session.port import SessionInfo
from tui.session.preflight import CliLoader
from tui.store.console_files import ConsoleFiles
from tui.store.history import default_data_dir, history_file
from tui.telemetry.gpu_release import wait_gpu_released


class NvmlRelease:
    """Waits until NVML no longer lists a stopped server's processes (bounded)."""

    def __init__(self, nvml: LocalGpu) -> None:
        self._nvml = nvml

    async def __call__(self, pids: set[int]) -> str | None:
        """``None`` once released, else why the wait ended without proof."""
        return await wait_gpu_released(self._nvml.sample, pids)


class LocalVllmMode:
    """Builds a session that launches the vLLM at ``--vllm`` on this machine."""

    label = "vllm"

    def build(self, options: ConsoleOptions) -> Session:
        """The session for ``options``; raises :class:`SetupError` for what cannot work."""
        info, services = self.parts(options)
        return assemble(info, services, poll_interval_s=options.poll_interval_s)

    def parts(self, options: ConsoleOptions) -> tuple[SessionInfo, Services]:
        """What :meth:`build` joins: the session's facts and the adapters it chose."""
        check_serve_line(options)
        resolved = shutil.which(options.vllm)
        if resolved is None:
            raise SetupError(
                f"vllm executable not found: {options.vllm!r}",
                hint="install vLLM, pass --vllm PATH, run `vtc setup-cpu-vllm` for the CPU "
                "build, or try `vtc --demo`",
            )
        data_dir = options.data_dir or default_data_dir()
        env = dict(os.environ)
        said: list[str] = []
        history = open_history(history_file(data_dir), said)
        back = reattach(
            data_dir, demo=False, credentials=Credentials.from_env(env), history=history[1]
        )
        named = named_start(options)
        point = starting_point(options, fallback=back.flags if not named else None)
        files = ConsoleFiles(data_dir)
        if not named and back.flags is None:
            resume_form(point, files.read_form())  # where the last console left the form
        credentials = Credentials.from_env(env, command_line=point.secrets)
        nvml = adapters.local_gpu(resolved)
        visible = env.get("CUDA_VISIBLE_DEVICES")  # how many GPUs the server may use
        server_env = credentials.server_env()
        services = launching_services(
            options,
            data_dir,
            history=history,
            back=back,
            machine=adapters.machine(
                [resolved],
                device=adapters.device_memory(nvml=nvml, visible=visible),
                env=server_env,
                inherited=env,
                log_dir=data_dir / "logs",
                startup_timeout_s=options.startup_timeout,
            ),
            credentials=credentials,
            gpu=adapters.gpu_source(
                metrics_url=options.gpu_metrics_url, nvml=nvml, cuda_visible_devices=visible
            ),
            reproducer=adapters.vllm_reproducer(
                resolved, nvml, launch_env=server_env, inherited_env=env
            ),
            files=files,
            release=NvmlRelease(nvml) if nvml is not None else None,
            cli=_cli_loader(resolved),
        )
        info = SessionInfo(
            label=f"vllm: {resolved}",
            initial_flags=point.flags,
            initial_load=point.load,
            presets=point.presets,
            initial_preset=point.preset.name if point.preset is not None else None,
            notices=[*said, *point.notices, *back.notices],
            executable=resolved,
            port=_port(point.flags),
            protected_runs=back.protected,
        )
        return info, services


def _cli_loader(vllm_executable: str) -> CliLoader | None:
    python = python_for_vllm(vllm_executable)  # the #! line of the vllm console script
    return functools.partial(introspect_vllm, python) if python is not None else None


def _port(flags: ServeFlags) -> int:
    return flags.port if flags.port is not None else free_port()
