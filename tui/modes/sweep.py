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
from tui.server.kv_estimator import KvEstimator
from tui.server.launcher import ProcessLauncher
from tui.session.port import SessionInfo
from tui.session.slot import ServerSlot
from tui.sim.catalog import DEFAULT_GPU
from tui.store.history import default_data_dir
from tui.store.profiles import load_profile
from tui.store.server_state import ServerStateError, ServerStateFile
from tui.tune.gpus import gpus_per_trial, lanes, visible_gpus
from tui.tune.prune import Estimator
from tui.tune.twin import Twin, catalogue_twin
from tui.tune.twin_profile import ProfileTwin

DEV_MODE_ENV = {"VLLM_SERVER_DEV_MODE": "1"}


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
        """The twin-first strategy's twin: the demo's own catalogue GPU (the simulator's
        model, scaled to its runs), or the spec's ``[twin] profile`` from the data dir;
        ``None`` for other strategies, or to let it calibrate a cold profile on its first
        start."""
        if self.spec.strategy != "twin":
            return None
        if options.demo:
            gpu = options.sim_gpu or self.spec.sim_gpu or DEFAULT_GPU
            return catalogue_twin(gpu, self.spec.goodput_slos())
        if self.spec.twin.profile is None:
            return None
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

    def _common(self, data_dir: Path, index: int, *, demo: bool) -> tuple[Credentials, Path]:
        """Credentials and the run store; a server a killed sweep left on this lane: stopped."""
        kind = "demo" if demo else "vllm"
        state = ServerStateFile(data_dir / f"sweep-{kind}-lane{index}.json")
        if state.exists():
            stop_recorded_server(state, grace_s=STOP_GRACE_S)
        store = data_dir / ("demo-runs.sqlite" if demo else "runs.sqlite")
        return Credentials.from_env(self.env), store

    def _demo_lane(self, options: ConsoleOptions, data_dir: Path, index: int) -> LaneParts:
        credentials, store_path = self._common(data_dir, index, demo=True)
        gpu = options.sim_gpu or self.spec.sim_gpu or DEFAULT_GPU
        env = {**credentials.server_env(), **DEV_MODE_ENV, "CUDA_VISIBLE_DEVICES": str(index)}
        per_trial = gpus_per_trial(self.spec)
        estimator = adapters.estimator(
            adapters.device_memory(sim_gpu=gpu, sim_count=per_trial), env={**self.env, **env},
            simulated=True, config_env=self.env,
        )  # fmt: skip
        launcher = adapters.launcher(
            simulator_command(), estimator=estimator, env=env, log_dir=data_dir / "demo-logs",
            startup_timeout_s=options.startup_timeout,
        )  # fmt: skip
        args = [
            "--sim-gpu",
            gpu,
            "--sim-speed",
            f"{options.sim_speed:g}",
            "--sim-gpus",
            str(per_trial),
        ]
        name = f"sim{index}"
        choice = adapters.gpu_source(simulated=True)
        return self._lane(options, data_dir, index, name, launcher, store_path, credentials,
                          estimator, launch_args=args, demo=True, gpu=choice)  # fmt: skip

    def _local_lane(
        self,
        options: ConsoleOptions,
        data_dir: Path,
        vllm: str,
        index: int,
        group: str | None,
        nvml: LocalGpu | None,
    ) -> LaneParts:
        credentials, store_path = self._common(data_dir, index, demo=False)
        env = {**credentials.server_env(), **DEV_MODE_ENV}
        if group is not None:
            env["CUDA_VISIBLE_DEVICES"] = group
        first = int(group.split(",")[0]) if group and group.split(",")[0].isdigit() else 0
        estimator = adapters.estimator(
            adapters.device_memory(nvml=nvml, index=first, visible=group), env={**self.env, **env}
        )
        launcher = adapters.launcher(
            [vllm], estimator=estimator, env=env, log_dir=data_dir / "logs",
            startup_timeout_s=options.startup_timeout,
        )  # fmt: skip
        name = f"gpu{group}" if group is not None else "cpu"
        # One lane reads NVML for the panel; the lane's CUDA_VISIBLE_DEVICES marks its GPUs.
        choice = adapters.gpu_source(nvml=nvml if index == 0 else None, cuda_visible_devices=group)
        return self._lane(options, data_dir, index, name, launcher, store_path, credentials,
                          estimator, gpu=choice, executable=vllm)  # fmt: skip

    def _lane(
        self,
        options: ConsoleOptions,
        data_dir: Path,
        index: int,
        name: str,
        launcher: ProcessLauncher,
        store_path: Path,
        credentials: Credentials,
        estimator: KvEstimator,
        *,
        gpu: adapters.GpuChoice,
        launch_args: Sequence[str] = (),
        executable: str | None = None,
        demo: bool = False,
    ) -> LaneParts:
        said: list[str] = []
        store, history = open_history(store_path, said)
        kind = "demo" if demo else "vllm"
        keeper = ServerStateKeeper(
            ServerStateFile(data_dir / f"sweep-{kind}-lane{index}.json"), mode=kind
        )
        services = Services(
            store=store, history=history,
            slot=ServerSlot(launcher=launcher, keeper=keeper, launch_args=launch_args),
            metrics=MetricsReader(local_client(credentials)),
            runner=ProcessLoadRunner(api_key=credentials.api_key),
            gpu=gpu.reader, gpu_policy=gpu.policy,
            estimator=estimator,
        )  # fmt: skip
        flags = self.spec.base.flags_for({})
        info = SessionInfo(
            label=f"sweep {self.spec.name} · {name}",
            initial_flags=flags,
            executable=executable or " ".join(simulator_command()),
            port=flags.port or free_port(),
            protected_runs=_watched(data_dir, demo),
            notices=said,
        )
        return LaneParts(name, info, services, estimator)


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
