"""The composition root: builds a ``Session`` from console options.

The CLI, the demo and the tests all build their session here, so what the tests exercise is
what the operator runs. Only adapters are chosen here; no logic lives in this module.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
from pydantic import ValidationError

from tui.domain.events import ServerEvent
from tui.domain.flags import ArgvError, ServeFlags, parse_serve_argv, problems_from_error
from tui.domain.preflight import DeviceMemory
from tui.domain.presets import Preset
from tui.domain.telemetry import GpuSample, HostSample, ServerMetrics
from tui.domain.vllm_cli import VllmCli
from tui.domain.workload import LoadSpec
from tui.load.runner import LoadRunner
from tui.server.adopted import AdoptedServer, ServerStateKeeper, inspect_state_file
from tui.server.attached import AttachedServer, attach_url
from tui.server.introspect import introspect_vllm, python_for_vllm
from tui.server.kv_estimator import (
    KvEstimator,
    console_children,
    cpu_node_memory,
    gpu_device_from_sample,
    is_cpu_build,
    sim_gpu_device,
)
from tui.server.supervisor import Supervisor
from tui.session import ExistingServerFactory, LaunchConfig, PollerLike, Session, simulator_command
from tui.store.history import RunStore, default_data_dir
from tui.store.presets import load_presets
from tui.store.server_state import ServerStateFile
from tui.telemetry.dcgm import DcgmGpuSource
from tui.telemetry.gpu_release import wait_gpu_released
from tui.telemetry.host import HostSource
from tui.telemetry.nvml import NvmlGpuSource
from tui.telemetry.poller import Poller
from tui.telemetry.vllm_metrics import VllmMetricsSource

T = TypeVar("T")

DEMO_PRESET = "demo-rtx3080-8b-fp8"
DEFAULT_SIM_GPU = "rtx3080-10gb"
ATTACHED_FORM_MODEL = "attached"


class ConsoleSetupError(Exception):
    """Options that cannot make a console (the message says what to change)."""


@dataclass
class ConsoleOptions:
    """What the ``vtc`` command line asked for."""

    demo: bool = False
    preset: str | None = None
    vllm: str = "vllm"
    model: str | None = None
    sim_gpu: str | None = None
    sim_speed: float = 4.0
    gpu_metrics_url: str | None = None
    startup_timeout: float = 900.0
    autostart: bool = True
    serve_args: list[str] = field(default_factory=list)
    data_dir: Path | None = None
    poll_interval_s: float = 1.0
    attach: str | None = None  # the URL of a server this console watches but did not start

    @classmethod
    def from_args(cls, args: argparse.Namespace, serve_args: Sequence[str]) -> ConsoleOptions:
        """From ``vtc``'s parsed arguments and the ``-- serve ...`` tail."""
        return cls(
            demo=args.demo,
            preset=args.preset,
            vllm=args.vllm,
            model=args.model,
            sim_gpu=args.sim_gpu,
            sim_speed=args.sim_speed,
            gpu_metrics_url=args.gpu_metrics_url,
            startup_timeout=args.startup_timeout,
            autostart=not args.no_autostart,
            serve_args=list(serve_args),
            attach=args.attach,
        )


class _ClosingPoller:
    """A poller that also closes its source (an HTTP client, NVML) when stopped."""

    def __init__(self, poller: Poller[Any], close: Callable[[], object]) -> None:
        self._poller = poller
        self._close = close

    def start(self) -> None:
        self._poller.start()

    async def stop(self) -> None:
        await self._poller.stop()
        result = self._close()
        if hasattr(result, "__await__"):
            await result


def _polling(
    sample: Callable[[], T] | Callable[[], Awaitable[T]],
    on_sample: Callable[[T], None],
    *,
    interval: float,
    name: str,
    close: Callable[[], object] = lambda: None,
) -> PollerLike:
    return _ClosingPoller(Poller(sample, on_sample, interval=interval, name=name), close)


def _local_client() -> httpx.AsyncClient:
    # trust_env=False: a proxy from the environment must never sit between the console and
    # a server on this machine.
    return httpx.AsyncClient(trust_env=False)


def _initial_flags(options: ConsoleOptions, preset: Preset | None) -> ServeFlags:
    if options.attach and not (options.serve_args or preset or options.model):
        return ServeFlags(model=ATTACHED_FORM_MODEL)  # the form is inert: r is refused
    if options.serve_args:
        try:
            flags = parse_serve_argv(options.serve_args).to_flags()
        except ArgvError as exc:
            raise ConsoleSetupError(f"the serve command line after --: {exc}") from exc
        except ValidationError as exc:
            detail = "; ".join(
                f"{p.field}: {p.message}" if p.field else p.message
                for p in problems_from_error(exc)
            )
            raise ConsoleSetupError(f"the serve command line after --: {detail}") from exc
    elif preset is not None:
        flags = preset.flags
    elif options.model:
        flags = ServeFlags(model=options.model)
    else:
        raise ConsoleSetupError(
            "name a model: --model NAME, --preset NAME (see `vtc presets`), or "
            "`-- serve MODEL [flags]`; or try `vtc --demo`"
        )
    if options.model:
        flags = flags.replace(model=options.model)
    return flags


def build_session(options: ConsoleOptions, *, store: RunStore | None = None) -> Session:
    """A ready-to-start session for ``options`` (demo: the simulator; else real vLLM).

    ``attach``: a server at a URL, watched and loaded, never restarted or stopped. Else, a
    server a previous console started and left running (its state file in the data dir,
    one for the demo, one for real vLLM) is adopted instead of launching a new one.
    """
    attach: str | None = None
    if options.attach is not None:
        if options.demo:
            raise ConsoleSetupError("--attach watches a server at a URL; drop --demo")
        try:
            attach = attach_url(options.attach)
        except ValueError as exc:
            raise ConsoleSetupError(str(exc)) from exc
    catalog = load_presets()
    preset_name = options.preset or (
        DEMO_PRESET if options.demo and not options.serve_args else None
    )
    preset = catalog.get(preset_name) if preset_name else None
    if preset_name and preset is None:
        known = ", ".join(p.name for p in catalog.presets)
        raise ConsoleSetupError(f"no preset called {preset_name!r}; known: {known}")
    flags = _initial_flags(options, preset)
    load = preset.workload if preset and preset.workload else LoadSpec()
    data_dir = options.data_dir or default_data_dir()

    vllm_cli_loader: Callable[[], VllmCli] | None = None  # demo: the simulator has its own CLI
    gpu_release: Callable[[set[int]], Awaitable[str | None]] | None = None  # NVML mode only
    if options.demo:
        gpu = options.sim_gpu or (preset.sim_gpu if preset and preset.sim_gpu else DEFAULT_SIM_GPU)
        command = simulator_command()
        launch_args = ["--sim-gpu", gpu, "--sim-speed", f"{options.sim_speed:g}"]
        mode_label = f"demo · simulated {gpu}"
        store = store or RunStore(data_dir / "demo-runs.sqlite")
        log_dir = data_dir / "demo-logs"

        def device() -> DeviceMemory | None:  # the pre-flight estimate's device
            return sim_gpu_device(gpu)
    elif attach is not None:
        command, launch_args = [options.vllm], []  # never launched: r is refused
        mode_label = f"attached: {attach}"
        store = store or RunStore(data_dir / "runs.sqlite")
        log_dir = data_dir / "logs"

        def device() -> DeviceMemory | None:  # no pre-flight for a server we do not launch
            return None
    else:
        resolved = shutil.which(options.vllm)
        if resolved is None:
            raise ConsoleSetupError(
                f"vllm executable not found: {options.vllm!r}. Install vLLM, pass --vllm PATH, "
                "run `vtc setup-cpu-vllm` for the CPU build, or try `vtc --demo`."
            )
        command, launch_args = [resolved], []
        vllm_python = python_for_vllm(resolved)  # the #! line of the vllm console script
        if vllm_python is not None:
            vllm_cli_loader = functools.partial(introspect_vllm, vllm_python)
        mode_label = f"vllm: {resolved}"
        store = store or RunStore(data_dir / "runs.sqlite")
        log_dir = data_dir / "logs"
        cpu_build = is_cpu_build(resolved)
        device_nvml = None if cpu_build else NvmlGpuSource()
        if device_nvml is not None:
            gpu_release = functools.partial(wait_gpu_released, device_nvml.sample)

        def device() -> DeviceMemory | None:  # the CPU build's NUMA node, else NVML's GPU 0
            if device_nvml is None:
                return cpu_node_memory()
            return gpu_device_from_sample(device_nvml.sample(), 0, console_children())

    launch = LaunchConfig(
        command=command,
        launch_args=launch_args,
        env={},  # secrets reach the server through the inherited environment
        log_dir=log_dir,
        mode_label=mode_label,
        startup_timeout_s=options.startup_timeout,
    )
    interval = options.poll_interval_s

    def supervisor_factory(on_event: Callable[[ServerEvent], None]) -> Supervisor:
        return Supervisor(
            command=launch.command,
            env=launch.env,
            log_dir=launch.log_dir,
            on_event=on_event,
            startup_timeout_s=launch.startup_timeout_s,
            grace_s=launch.grace_s,
        )

    def metrics_poller(base_url: str, on_sample: Callable[[ServerMetrics], None]) -> PollerLike:
        source = VllmMetricsSource(base_url.rstrip("/") + "/metrics", _local_client())
        return _polling(
            source.sample, on_sample, interval=interval, name="metrics", close=source.aclose
        )

    gpu_poller_factory: Callable[[Callable[[GpuSample], None]], PollerLike] | None = None
    if not options.demo:
        if options.gpu_metrics_url:
            dcgm = DcgmGpuSource(options.gpu_metrics_url, _local_client())

            def gpu_poller_factory(on_sample: Callable[[GpuSample], None]) -> PollerLike:
                return _polling(
                    dcgm.sample, on_sample, interval=interval, name="gpu", close=dcgm.aclose
                )
        else:
            nvml = NvmlGpuSource()

            def gpu_poller_factory(on_sample: Callable[[GpuSample], None]) -> PollerLike:
                return _polling(
                    nvml.sample, on_sample, interval=interval, name="gpu", close=nvml.close
                )

    def host_poller(
        pid: Callable[[], int | None], on_sample: Callable[[HostSample], None]
    ) -> PollerLike:
        host = HostSource(pid)
        return _polling(host.sample, on_sample, interval=interval, name="host")

    api_key = os.environ.get("OPENAI_API_KEY") or os.environ.get("VLLM_API_KEY")
    server_key = os.environ.get("VLLM_API_KEY") or os.environ.get("OPENAI_API_KEY")
    existing: ExistingServerFactory | None = None
    keeper: ServerStateKeeper | None = None
    notices: list[str] = []
    if attach is not None:
        url = attach

        def existing() -> AttachedServer:
            return AttachedServer(url, api_key=server_key, poll_interval_s=interval)
    else:
        state_file = ServerStateFile.in_data_dir(data_dir, demo=options.demo)
        keeper = ServerStateKeeper(state_file, mode="demo" if options.demo else "vllm")
        found = inspect_state_file(state_file)
        if found.notice:
            notices.append(found.notice)
        if found.record is not None:
            adopted = found.record
            stored = next((r for r in store.list() if r.id == adopted.run_id), None)

            def existing() -> AdoptedServer:
                return AdoptedServer(
                    adopted,
                    api_key=os.environ.get("VLLM_API_KEY"),
                    grace_s=launch.grace_s,
                    startup=stored.startup if stored is not None else None,
                )

    return Session(
        launch=launch,
        store=store,
        presets=catalog.presets,
        initial_flags=flags,
        initial_load=load,
        supervisor_factory=supervisor_factory,
        load_runner_factory=lambda: LoadRunner(api_key=api_key),
        metrics_poller_factory=metrics_poller,
        gpu_poller_factory=gpu_poller_factory,
        host_poller_factory=host_poller,
        gpu_from_server_metrics=options.demo,
        autostart=options.demo and options.autostart,
        can_restart=attach is None,
        initial_preset=preset.name if preset is not None and not options.serve_args else None,
        estimator=KvEstimator(device, env={**os.environ, **launch.env}) if attach is None else None,
        vllm_cli_loader=vllm_cli_loader,
        gpu_release=gpu_release,
        existing_server=existing,
        server_state=keeper,
        notices=notices,
    )
