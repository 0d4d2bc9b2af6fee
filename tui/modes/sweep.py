"""The sweep mode: ``vtc sweep``'s sessions, one per GPU lane, built like demo/local's.

Each lane is a session of its own (its launcher pinned to its GPUs with
``CUDA_VISIBLE_DEVICES``, its own port and state file) over the same run history, so every
trial is a run on the board of ``vtc`` (or ``vtc --demo``). The servers run with
``VLLM_SERVER_DEV_MODE=1``, as auto_tune.sh and ``vllm bench sweep serve`` start them, for
``/reset_prefix_cache``. A lane's state file names the server it runs, so a sweep killed
mid-way (its servers live on in their own sessions) has them stopped by the next run
before it resumes. Each load carries the spec's goodput thresholds.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tui.domain.credentials import Credentials
from tui.domain.sweep.slo import OBJECTIVE_KEYS
from tui.domain.sweep.spec import SweepSpec
from tui.load.process import ProcessLoadRunner
from tui.modes import adapters
from tui.modes.adapters import STOP_GRACE_S, simulator_command
from tui.modes.common import Services, free_port, open_history
from tui.modes.options import ConsoleOptions, SetupError
from tui.modes.sources import LocalGpu, MetricsReader, local_client
from tui.server.adopted import ServerStateKeeper, stop_recorded_server
from tui.session.port import SessionInfo
from tui.session.repro import Reproducer
from tui.sim.catalog import DEFAULT_GPU
from tui.store.history import default_data_dir, history_file
from tui.store.profiles import load_profile
from tui.store.server_state import ServerStateError, ServerStateFile
from tui.tune.gpus import gpus_per_trial, lanes, visible_gpus
from tui.tune.prune import Estimator
from tui.tune.twin import Twin, catalogue_twin
from tui.tune.twin_profile import ProfileTwin

DEV_MODE_ENV = {"VLLM_SERVER_DEV_MODE": "1"}
CLUSTER_DIR = "ray-sweeps"
"""``<node data dir>/ray-sweeps/<sweep id>/``: a cluster's workers' state files and scratch
run stores on each node (``tui.modes.ray_host``)."""


@dataclass
class LaneParts:
    """One lane: its name (its GPUs), the session's facts and adapters, its estimator."""

    name: str
    info: SessionInfo
    services: Services
    estimator: Estimator | None


class SweepMode:
    """Builds the lanes' sessions for a spec (``--demo``: simulators, else local vLLM).

    ``sim_gpus``: how many simulated GPUs the demo has (one lane each); ``gpus``: the GPUs
    to use (default: every visible one).
    """

    def __init__(
        self,
        spec: SweepSpec,
        *,
        sim_gpus: int = 1,
        gpus: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.spec = spec
        self.sim_gpus = max(1, sim_gpus)
        self.gpus = list(gpus) if gpus else None
        self.env = dict(os.environ if env is None else env)

    def data_dir(self, options: ConsoleOptions) -> Path:
        """Where the runs, logs, state files and journals go."""
        return options.data_dir or default_data_dir()

    def twin(self, options: ConsoleOptions) -> Twin | None:
        """The twin-first strategy's twin: the spec's ``[twin] profile`` from the data dir
        (a missing one refused, in --demo too), else the demo's own catalogue GPU (the
        simulator's model, scaled to its runs);
        ``None`` for other strategies, or to let it calibrate a cold profile on its first
        start."""
        if self.spec.strategy != "twin":
            return None
        if self.spec.twin.profile is None:  # a named profile is used in --demo too, or refused
            if not options.demo:
                return None
            gpu = options.sim_gpu or self.spec.sim_gpu or DEFAULT_GPU
            return catalogue_twin(gpu, self.spec.goodput_slos())
        profile = load_profile(self.spec.twin.profile, self.data_dir(options))
        key = OBJECTIVE_KEYS[self.spec.objective]
        return ProfileTwin(profile, objective_key=key, model=self.spec.base.model)

    def lane_parts(self, options: ConsoleOptions) -> list[LaneParts]:
        """Every lane (raises :class:`SetupError` for what cannot run)."""
        data_dir = self.data_dir(options)
        if options.demo:
            return [self._demo_lane(options, data_dir, i) for i in range(self.sim_gpus)]
        resolved = shutil.which(options.vllm)
        if resolved is None:
            raise SetupError(
                f"vllm executable not found: {options.vllm!r}",
                hint="pass --vllm PATH, run `vtc setup-cpu-vllm`, or sweep the simulator: --demo",
            )
        nvml = adapters.local_gpu(resolved)
        if nvml is None:  # the CPU build: one lane, no GPU
            return [self._local_lane(options, data_dir, resolved, 0, None, None)]
        groups = lanes(
            self.gpus or visible_gpus(self.env, lambda: _count(nvml)), gpus_per_trial(self.spec)
        )
        if not groups:
            raise SetupError(
                "no GPU visible for the sweep", hint="check nvidia-smi, CUDA_VISIBLE_DEVICES"
            )
        return [
            self._local_lane(options, data_dir, resolved, i, g, nvml) for i, g in enumerate(groups)
        ]

    def node_lane(self, options: ConsoleOptions, data_dir: Path, node: NodeLane) -> LaneParts:
        """The lane of one cluster worker (``tui.modes.ray_host``): pinned to the GPUs the
        cluster gave it, its own state file, a scratch run store (the head writes the board),
        each run's reproduction naming the node."""
        if options.demo:
            return self._demo_lane(options, data_dir, 0, node=node)
        resolved = shutil.which(options.vllm)
        if resolved is None:
            raise SetupError(f"vllm executable not found on this node: {options.vllm!r}")
        nvml = adapters.local_gpu(resolved)
        group = ",".join(node.gpus) if node.gpus else None
        return self._local_lane(options, data_dir, resolved, 0, group, nvml, node=node)

    def _common(
        self, data_dir: Path, index: int, *, demo: bool, node: NodeLane | None = None
    ) -> tuple[Credentials, Path]:
        """Credentials and the run store; a server a killed sweep left on this lane: stopped."""
        state = ServerStateFile(_state_path(data_dir, index, demo, node))
        if state.exists():
            stop_recorded_server(state, grace_s=STOP_GRACE_S)
        store = history_file(data_dir, demo)
        return Credentials.from_env(self.env), node.store if node is not None else store

    def _demo_lane(
        self, options: ConsoleOptions, data_dir: Path, index: int, *, node: NodeLane | None = None
    ) -> LaneParts:
        credentials, store_path = self._common(data_dir, index, demo=True, node=node)
        gpu = options.sim_gpu or self.spec.sim_gpu or DEFAULT_GPU
        visible = ",".join(node.gpus) if node is not None and node.gpus else str(index)
        env = {**credentials.server_env(), **DEV_MODE_ENV, "CUDA_VISIBLE_DEVICES": visible}
        per_trial = gpus_per_trial(self.spec)
        machine = adapters.machine(
            simulator_command(),
            device=adapters.device_memory(sim_gpu=gpu, sim_count=per_trial),
            env=env,
            inherited=self.env,
            log_dir=data_dir / "demo-logs",
            startup_timeout_s=options.startup_timeout,
            simulated=True,
        )
        args = [
            "--sim-gpu",
            gpu,
            "--sim-speed",
            f"{options.sim_speed:g}",
            "--sim-gpus",
            str(per_trial),
        ]
        name = f"sim{index}" if node is None else node.name
        choice = adapters.gpu_source(simulated=True)
        reproducer = None
        if node is not None:  # a cluster's trial: its runs name the node and the GPU model
            reproducer = adapters.sim_reproducer(gpu, launch_env=env, inherited_env=self.env)
        return self._lane(
            options,
            data_dir,
            index,
            name,
            machine,
            store_path,
            credentials,
            launch_args=args,
            demo=True,
            gpu=choice,
            node=node,
            reproducer=reproducer,
        )

    def _local_lane(
        self,
        options: ConsoleOptions,
        data_dir: Path,
        vllm: str,
        index: int,
        group: str | None,
        nvml: LocalGpu | None,
        *,
        node: NodeLane | None = None,
    ) -> LaneParts:
        credentials, store_path = self._common(data_dir, index, demo=False, node=node)
        env = {**credentials.server_env(), **DEV_MODE_ENV}
        if group is not None:
            env["CUDA_VISIBLE_DEVICES"] = group
        first = int(group.split(",")[0]) if group and group.split(",")[0].isdigit() else 0
        machine = adapters.machine(
            [vllm],
            device=adapters.device_memory(nvml=nvml, index=first, visible=group),
            env=env,
            inherited=self.env,
            log_dir=data_dir / "logs",
            startup_timeout_s=options.startup_timeout,
        )
        name = f"gpu{group}" if group is not None else "cpu"
        # One lane reads NVML for the panel; the lane's CUDA_VISIBLE_DEVICES marks its GPUs.
        choice = adapters.gpu_source(nvml=nvml if index == 0 else None, cuda_visible_devices=group)
        reproducer = None
        if node is not None:  # a cluster's trial: each run names the node, GPU and driver
            name = node.name
            reproducer = adapters.vllm_reproducer(
                vllm, nvml, launch_env=env, inherited_env=self.env
            )
        return self._lane(
            options,
            data_dir,
            index,
            name,
            machine,
            store_path,
            credentials,
            gpu=choice,
            executable=vllm,
            node=node,
            reproducer=reproducer,
        )

    def _lane(
        self,
        options: ConsoleOptions,
        data_dir: Path,
        index: int,
        name: str,
        machine: adapters.Machine,
        store_path: Path,
        credentials: Credentials,
        *,
        gpu: adapters.GpuChoice,
        launch_args: Sequence[str] = (),
        executable: str | None = None,
        demo: bool = False,
        node: NodeLane | None = None,
        reproducer: Reproducer | None = None,
    ) -> LaneParts:
        said: list[str] = []
        store, history = open_history(store_path, said)
        kind = "demo" if demo else "vllm"
        keeper = ServerStateKeeper(
            ServerStateFile(_state_path(data_dir, index, demo, node)), mode=kind
        )
        services = Services(
            store=store,
            history=history,
            slot=machine.slot(keeper, launch_args),
            metrics=MetricsReader(local_client(credentials)),
            runner=ProcessLoadRunner(api_key=credentials.api_key),
            gpu=gpu.reader,
            gpu_policy=gpu.policy,
            estimator=machine.estimator,
            reproducer=reproducer,
        )
        flags = self.spec.base.flags_for({})
        info = SessionInfo(
            label=f"sweep {self.spec.name} · {name}",
            initial_flags=flags,
            executable=executable or " ".join(simulator_command()),
            port=flags.port or free_port(),
            protected_runs=_watched(data_dir, demo),
            notices=said,
        )
        return LaneParts(name, info, services, machine.estimator)


@dataclass(frozen=True)
class NodeLane:
    """One cluster worker's lane: its name, the GPU ids the cluster gave it, where its
    server's state file and its scratch run store live on its node."""

    name: str
    gpus: tuple[str, ...]
    state: Path
    store: Path


def _state_path(data_dir: Path, index: int, demo: bool, node: NodeLane | None) -> Path:
    """The lane's server state file (a killed sweep's server is found and stopped by it)."""
    if node is not None:
        return node.state
    return data_dir / f"sweep-{'demo' if demo else 'vllm'}-lane{index}.json"


def _count(nvml: LocalGpu) -> int:
    return len(nvml.sample().devices)


def _watched(data_dir: Path, demo: bool) -> frozenset[int]:
    """The run a console watches in this data dir right now: never marked lost by a sweep."""
    try:
        record = ServerStateFile.in_data_dir(data_dir, demo=demo).read()
    except ServerStateError:
        return frozenset()
    return (
        frozenset({record.run_id})
        if record is not None and record.run_id is not None
        else frozenset()
    )
