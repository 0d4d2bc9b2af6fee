"""The demo: the built-in simulator as the server, its simulated GPU as the GPU.

``vtc --demo`` launches ``vtc-sim serve`` (run by this same Python) with the demo preset,
a simulated GPU (default the RTX 3080 10 GB of the write-up vtc was born from) and a time
scale. The GPU panel reads the simulator's own DCGM-style gauges from its /metrics page;
pre-flight estimates use the simulator's catalogue for both the GPU and the model shapes
(marked as such). Demo runs live in a history of their own (``demo-runs.sqlite``).
"""

from __future__ import annotations

import os
from pathlib import Path

from tui.domain.credentials import Credentials
from tui.domain.profile import ProfileError
from tui.domain.telemetry import SimInfo
from tui.modes import adapters
from tui.modes.adapters import simulator_command
from tui.modes.common import (
    Services,
    assemble,
    free_port,
    named_start,
    open_history,
    reattach,
    resume_form,
    starting_point,
)
from tui.modes.launching import launching_services
from tui.modes.options import ConsoleOptions
from tui.session.facade import Session
from tui.session.port import SessionInfo
from tui.sim.argv import profile_version
from tui.sim.catalog import DEFAULT_GPU, UnknownGpuError, resolve_gpu
from tui.sim.logs import VERSION as SIM_VLLM_VERSION
from tui.store.console_files import ConsoleFiles
from tui.store.history import default_data_dir, history_file
from tui.store.profiles import load_profile, profile_file

DEMO_PRESET = "demo-rtx3080-8b-fp8"
NO_FLAG_LIST = "demo: the simulator's flags are the declared ones"


def demo_label(gpu: str, speed: float) -> str:
    """The console's header for the demo: the simulated GPU, and when time is scaled, by how
    much (every latency and rate the simulator reports is then scaled by it)."""
    try:
        name = resolve_gpu(gpu).name
    except UnknownGpuError:
        name = gpu  # the simulator will refuse it with its own message
    return f"demo · {SimInfo(name, speed).label}"


class DemoMode:
    """Builds a session whose servers are the simulator."""

    label = "demo"

    def build(self, options: ConsoleOptions) -> Session:
        """The demo session for ``options`` (nothing starts until ``Session.start``)."""
        info, services = self.parts(options)
        return assemble(info, services, poll_interval_s=options.poll_interval_s)

    def parts(self, options: ConsoleOptions) -> tuple[SessionInfo, Services]:
        """What :meth:`build` joins: the session's facts and the adapters it chose."""
        data_dir = options.data_dir or default_data_dir()
        env = dict(os.environ)
        said: list[str] = []
        store, history = open_history(history_file(data_dir, demo=True), said)
        point = starting_point(options, default_preset=DEMO_PRESET)
        credentials = Credentials.from_env(env, command_line=point.secrets)
        back = reattach(data_dir, demo=True, credentials=credentials, history=history)
        files = ConsoleFiles(data_dir, history="demo-runs", demo=True)
        if not named_start(options) and back.flags is None:
            resume_form(point, files.read_form())  # where the last console left the form
        preset = point.preset
        gpu = options.sim_gpu or (preset.sim_gpu if preset and preset.sim_gpu else DEFAULT_GPU)
        server_env = credentials.server_env()
        launch_args = ["--sim-gpu", gpu, "--sim-speed", f"{options.sim_speed:g}"]
        if options.sim_host != "linux":
            launch_args += ["--sim-host", options.sim_host]
        speaks = SIM_VLLM_VERSION
        if options.sim_profile:
            path = profile_file(options.sim_profile, data_dir)
            launch_args += ["--sim-profile", str(path)]
            speaks = _spoken_with(path)
        services = launching_services(
            options,
            data_dir,
            history=(store, history),
            back=back,
            machine=adapters.machine(
                simulator_command(),
                device=adapters.device_memory(sim_gpu=gpu),
                env=server_env,
                inherited=env,
                log_dir=data_dir / "demo-logs",
                startup_timeout_s=options.startup_timeout,
                simulated=True,
            ),
            credentials=credentials,
            # The GPU is the simulator's own gauges on its /metrics page, freed when it exits.
            gpu=adapters.gpu_source(simulated=True),
            reproducer=adapters.sim_reproducer(
                gpu, launch_env=server_env, inherited_env=env, version=speaks
            ),
            files=files,
            launch_args=launch_args,
            twin_gpu=gpu,
        )
        info = SessionInfo(
            label=demo_label(gpu, options.sim_speed),
            initial_flags=back.flags or point.flags,
            initial_load=point.load,
            presets=point.presets,
            initial_preset=preset.name if preset is not None and back.flags is None else None,
            notices=[*said, *point.notices, *back.notices],
            autostart=options.autostart,
            executable=" ".join(simulator_command()),
            port=point.flags.port or free_port(),
            protected_runs=back.protected,
            no_flag_list=NO_FLAG_LIST,
        )
        return info, services


def _spoken_with(profile: Path) -> str:
    """The vLLM the simulator speaks with ``profile`` (the release it was fitted on; the
    default when the file cannot be read: the simulator says why when it starts)."""
    try:
        return profile_version(load_profile(str(profile)), SIM_VLLM_VERSION, named=False)
    except ProfileError:
        return SIM_VLLM_VERSION
