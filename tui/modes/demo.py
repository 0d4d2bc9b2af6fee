"""The demo: the built-in simulator as the server, its simulated GPU as the GPU.

``vtc --demo`` launches ``vtc-sim serve`` (run by this same Python) with the demo preset,
a simulated GPU (default the RTX 3080 10 GB of the write-up vtc was born from) and a time
scale. The GPU panel reads the simulator's own DCGM-style gauges from its /metrics page;
pre-flight estimates use the simulator's catalogue for both the GPU and the model shapes
(marked as such). Demo runs live in a history of their own (``demo-runs.sqlite``).
"""

from __future__ import annotations

import os
import sys
import time

from tui.domain.credentials import Credentials
from tui.domain.preflight import DeviceMemory
from tui.domain.telemetry import GpuSample, SimInfo, SourceStatus
from tui.load.process import ProcessLoadRunner
from tui.modes.common import (
    STOP_GRACE_S,
    Services,
    assemble,
    free_port,
    open_history,
    reattach,
    starting_point,
)
from tui.modes.options import ConsoleOptions
from tui.modes.sources import HostReader, MetricsReader, local_client
from tui.server.diagnose import preflight_checker
from tui.server.kv_estimator import KvEstimator
from tui.server.launcher import ProcessLauncher
from tui.server.model_config import ModelConfig, find_model_config
from tui.server.repro import MachineReproducer
from tui.session.facade import Session
from tui.session.hub import GpuPolicy
from tui.session.port import SessionInfo
from tui.session.slot import ServerSlot
from tui.sim.catalog import (
    DEFAULT_GPU,
    UnknownGpuError,
    catalog_models,
    resolve_gpu,
    resolve_model,
)
from tui.sim.logs import VERSION as SIM_VLLM_VERSION  # the vLLM the simulator speaks
from tui.store.console_files import ConsoleFiles
from tui.store.history import default_data_dir

DEMO_PRESET = "demo-rtx3080-8b-fp8"
NO_FLAG_LIST = "demo: the simulator's flags are the declared ones"


def simulator_command() -> list[str]:
    """The simulator, run by this same Python (no reliance on PATH)."""
    return [sys.executable, "-m", "tui.sim"]


def sim_gpu_device(gpu: str, used_bytes: int = 0, count: int = 1) -> DeviceMemory:
    """The simulator's catalog GPU ``gpu`` (key or product name), ``used_bytes`` taken, on a
    simulated machine of ``count`` such GPUs (the demo launches one: no ``--sim-gpus``)."""
    spec = resolve_gpu(gpu)
    return DeviceMemory(
        spec.total_bytes, spec.total_bytes - used_bytes, "gpu", spec.name, gpu_count=count
    )


def sim_catalog_config(model: str) -> ModelConfig | None:
    """A catalogue model's published shape, for pre-flight when no config is on disk."""
    if model.strip().rstrip("/").lower() not in {m.lower() for m in catalog_models()}:
        return None
    entry = resolve_model(model)
    return ModelConfig(
        model,
        entry.shape,
        "sim-catalog",
        None,
        "not on disk: the simulator catalog's published shape of this model",
        entry.checkpoint_quantization,
        entry.tied_embeddings,
    )


def demo_label(gpu: str, speed: float) -> str:
    """The console's header for the demo: the simulated GPU, and when time is scaled, by how
    much (every latency and rate the simulator reports is then scaled by it)."""
    try:
        name = resolve_gpu(gpu).name
    except UnknownGpuError:
        name = gpu  # the simulator will refuse it with its own message
    return f"demo · {SimInfo(name, speed).label}"


def simulated_gpu_absent() -> GpuSample:
    """What the GPU panel says while no simulator runs."""
    return GpuSample(
        t=time.monotonic(),
        source="simulated",
        status=SourceStatus.UNAVAILABLE,
        message="simulated GPU: shown while the simulator runs",
    )


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
        store, history = open_history(data_dir / "demo-runs.sqlite", said)
        point = starting_point(options, default_preset=DEMO_PRESET)
        credentials = Credentials.from_env(env, command_line=point.secrets)
        preset = point.preset
        gpu = options.sim_gpu or (preset.sim_gpu if preset and preset.sim_gpu else DEFAULT_GPU)
        back = reattach(data_dir, demo=True, credentials=credentials, history=history)
        estimator = KvEstimator(
            lambda: sim_gpu_device(gpu),
            env={**env, **credentials.server_env()},
            find_config=lambda model: find_model_config(
                model, env=env, fallback=sim_catalog_config
            ),
        )
        launcher = ProcessLauncher(
            simulator_command(),
            fix_check=preflight_checker(estimator),
            env=credentials.server_env(),
            log_dir=data_dir / "demo-logs",
            startup_timeout_s=options.startup_timeout,
            grace_s=STOP_GRACE_S,
        )
        launch_args = ["--sim-gpu", gpu, "--sim-speed", f"{options.sim_speed:g}"]
        services = Services(
            store=store,
            history=history,
            slot=ServerSlot(
                launcher=launcher,
                existing=back.existing,
                keeper=back.keeper,
                launch_args=launch_args,
            ),
            metrics=MetricsReader(local_client(credentials)),
            runner=ProcessLoadRunner(api_key=credentials.api_key),
            host=HostReader(),
            # The GPU is the simulator's own gauges on its /metrics page, freed when it exits.
            gpu_policy=GpuPolicy(absent=simulated_gpu_absent(), simulated=True),
            reproducer=MachineReproducer(
                launch_env=credentials.server_env(),
                inherited_env=env,
                version=lambda: SIM_VLLM_VERSION,
                gpu_name=f"{resolve_gpu(gpu).name} (simulated)",
            ),
            estimator=estimator,
            files=ConsoleFiles(data_dir, history="demo-runs", demo=True),
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
