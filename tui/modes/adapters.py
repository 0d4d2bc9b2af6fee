"""The one adapter builder: every mode, every sweep lane and ``vtc top`` get their adapters here.

Each choice is made in exactly one function:

- :func:`local_gpu` this machine's GPU source for launched servers (NVML, or none for the
  CPU build of vLLM), shared by the panel, the estimate and the wait for freed memory;
- :func:`gpu_source` the GPU reading (a DCGM exporter's URL, this machine's NVML, the
  simulator's own gauges on its page, or "not visible" with the reason) and the policy the
  hub reads it with;
- :func:`device_memory` what the pre-flight estimate reads as the device (the simulator's
  catalogue GPU, NVML's GPU ``index``, or the CPU build's NUMA node);
- :func:`estimator` the pre-flight KV estimator (the simulator's catalogue shapes as the
  fallback when its models are not on disk);
- :func:`launcher` the process launcher (its fixes checked by that estimator);
- :func:`machine` both at once, the one way every mode builds them (the console's modes,
  every sweep lane and a calibration);
- :func:`vllm_reproducer` / :func:`sim_reproducer` what each run records of the machine
  (the installed vLLM's version, or the simulator's, and the GPU).

A new way of reading a GPU is its source in ``tui/telemetry/`` and one branch here
(:func:`local_gpu` for one on this machine, :func:`gpu_source` for one behind a URL).
"""

from __future__ import annotations

import functools
import sys
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tui.domain.gpus import remote_gpu_not_visible
from tui.domain.preflight import DeviceMemory
from tui.domain.telemetry import GpuSample, SourceStatus
from tui.domain.url_credentials import split_url
from tui.modes.sources import DcgmReader, LocalGpu, NvmlReader, local_client
from tui.server.backend import ExistingServer
from tui.server.diagnose import preflight_checker
from tui.server.introspect import IntrospectError, python_for_vllm, vllm_dist_version
from tui.server.kv_estimator import (
    KvEstimator,
    console_children,
    cpu_node_memory,
    gpu_device_from_sample,
    is_cpu_build,
)
from tui.server.launcher import ProcessLauncher
from tui.server.model_config import ModelConfig, find_model_config
from tui.server.process import STOP_GRACE_S
from tui.server.repro import MachineReproducer
from tui.session.hub import GpuPolicy, GpuReader
from tui.session.slot import ServerSlot, StateKeeper
from tui.sim.catalog import catalog_models, resolve_gpu, resolve_model
from tui.sim.logs import VERSION as SIM_VLLM_VERSION  # the vLLM the simulator speaks
from tui.telemetry.locality import is_local_url
from tui.telemetry.nvml import NvmlGpuSource
from tui.telemetry.scrape import DEFAULT_DEADLINE_S


# -- the simulator as a machine --------------------------------------------------------------
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


def simulated_gpu_absent() -> GpuSample:
    """What the GPU panel says while no simulator runs."""
    return GpuSample(
        t=time.monotonic(),
        source="simulated",
        status=SourceStatus.UNAVAILABLE,
        message="simulated GPU: shown while the simulator runs",
    )


def cpu_build_gpu() -> GpuSample:
    """What the GPU panel says for the CPU build of vLLM (no GPU source was given)."""
    return GpuSample(
        t=time.monotonic(),
        source="cpu",
        status=SourceStatus.UNAVAILABLE,
        message="CPU build of vLLM: no GPU in use (pass --gpu-metrics-url to watch one)",
    )


# -- the GPU reading -------------------------------------------------------------------------
def local_gpu(vllm_executable: str) -> LocalGpu | None:
    """This machine's GPU source for servers launched from ``vllm_executable``: NVML, or
    ``None`` for the CPU build of vLLM (no GPU in use)."""
    return None if is_cpu_build(vllm_executable) else NvmlGpuSource()


@dataclass(frozen=True)
class GpuChoice:
    """Where a server's GPU reading comes from: the reader the hub polls (``None``: the
    server's own page, or nothing), and how the hub weighs it."""

    reader: GpuReader | None
    policy: GpuPolicy


def gpu_source(
    *,
    simulated: bool = False,
    metrics_url: str | None = None,
    nvml: LocalGpu | None = None,
    attached_url: str | None = None,
    cuda_visible_devices: str | None = None,
    scrape_timeout_s: float = DEFAULT_DEADLINE_S,
    clock: Callable[[], float] = time.monotonic,
) -> GpuChoice:
    """The GPU source for a server, chosen once for every way of running.

    ``simulated``: the simulator's DCGM-style gauges on its own page (freed when it exits).
    ``metrics_url``: a dcgm-exporter (``--gpu-metrics-url``) beats everything else.
    ``nvml``: this machine's NVML for a server launched here (``None``: the CPU build).
    ``attached_url``: a server this console did not start; its page's gauges come first,
    then this machine's NVML when the URL is on this machine, else "remote GPU not
    visible" with the flag to pass. ``cuda_visible_devices`` marks a launched server's GPUs.
    """
    if simulated:
        return GpuChoice(None, GpuPolicy(absent=simulated_gpu_absent(), simulated=True))
    if attached_url is not None and metrics_url is None and nvml is None:
        nvml = NvmlGpuSource(clock=clock) if is_local_url(attached_url) else None
    reader: GpuReader | None = None
    if metrics_url:
        # A user:password in the URL goes as Basic authorization, nowhere else (shown clean).
        clean, credential = split_url(metrics_url)
        client = local_client(url_credential=credential)
        reader = DcgmReader(clean, client, timeout_s=scrape_timeout_s, clock=clock)
    elif nvml is not None:
        reader = NvmlReader(nvml)
    if attached_url is not None:
        host = urllib.parse.urlsplit(attached_url).hostname or attached_url
        absent = remote_gpu_not_visible(clock(), host=host)
        # The page's own gauges (the simulator's) beat this machine's NVML; a DCGM URL the
        # operator named beats both.
        policy = GpuPolicy(absent=None if reader else absent, page_first=not metrics_url)
        return GpuChoice(reader, policy)
    # A launched server inherits CUDA_VISIBLE_DEVICES: it marks the server's GPUs.
    policy = GpuPolicy(
        absent=None if reader is not None else cpu_build_gpu(),
        cuda_visible_devices=cuda_visible_devices,
    )
    return GpuChoice(reader, policy)


# -- pre-flight and launch -------------------------------------------------------------------
def device_memory(
    *,
    sim_gpu: str | None = None,
    sim_count: int = 1,
    nvml: LocalGpu | None = None,
    index: int = 0,
    visible: str | None = None,
) -> Callable[[], DeviceMemory | None]:
    """The device the pre-flight estimate reads: the simulator's catalogue GPU ``sim_gpu``
    (``sim_count`` of them), else NVML's GPU ``index`` (the console's own server counts as
    free; ``visible``: the server's CUDA_VISIBLE_DEVICES, how many GPUs it may use), else
    the CPU build's NUMA node as vLLM's CPU worker reads it."""
    if sim_gpu is not None:
        gpu = sim_gpu
        return lambda: sim_gpu_device(gpu, count=sim_count)
    if nvml is None:
        return cpu_node_memory
    source = nvml
    return lambda: gpu_device_from_sample(source.sample(), index, console_children(), visible)


def estimator(
    device: Callable[[], DeviceMemory | None],
    *,
    env: Mapping[str, str],
    simulated: bool = False,
    config_env: Mapping[str, str] | None = None,
) -> KvEstimator:
    """The pre-flight KV estimator over ``device``; ``env`` is what the server is launched
    with. ``simulated``: models not on disk take the simulator catalogue's shapes (looked up
    with ``config_env``, the console's own environment)."""
    if not simulated:
        return KvEstimator(device, env=dict(env))
    lookup_env = dict(config_env if config_env is not None else env)
    return KvEstimator(
        device,
        env=dict(env),
        find_config=lambda model: find_model_config(
            model, env=lookup_env, fallback=sim_catalog_config
        ),
    )


def launcher(
    command: Sequence[str],
    *,
    estimator: KvEstimator,
    env: Mapping[str, str],
    log_dir: Path,
    startup_timeout_s: float,
) -> ProcessLauncher:
    """The launcher of ``command`` (``vllm`` or the simulator), its fixes checked by the
    pre-flight ``estimator``."""
    return ProcessLauncher(
        list(command),
        fix_check=preflight_checker(estimator),
        env=dict(env),
        log_dir=log_dir,
        startup_timeout_s=startup_timeout_s,
        grace_s=STOP_GRACE_S,
    )


@dataclass(frozen=True)
class Machine:
    """What a mode launches servers with: the pre-flight estimator, and the launcher whose
    fixes that estimator checks."""

    estimator: KvEstimator
    launcher: ProcessLauncher

    def slot(
        self,
        keeper: StateKeeper,
        launch_args: Sequence[str] = (),
        existing: ExistingServer | None = None,
    ) -> ServerSlot:
        """The session's server slot over this machine's launcher: ``keeper`` records what
        it launches, ``existing`` is a server found running (adopted), ``launch_args`` go
        before every launch's own."""
        return ServerSlot(
            launcher=self.launcher, existing=existing, keeper=keeper, launch_args=launch_args
        )


def machine(
    command: Sequence[str],
    *,
    device: Callable[[], DeviceMemory | None],
    env: Mapping[str, str],
    inherited: Mapping[str, str],
    log_dir: Path,
    startup_timeout_s: float,
    simulated: bool = False,
) -> Machine:
    """The estimator and launcher of ``command`` on ``device``: ``env`` is what the server
    gets beyond ``inherited`` (the console's own environment, which the estimate also reads
    and, for the simulator, looks its models up with)."""
    kv = estimator(
        device,
        env={**inherited, **env},
        simulated=simulated,
        config_env=inherited if simulated else None,
    )
    return Machine(
        kv,
        launcher(
            command, estimator=kv, env=env, log_dir=log_dir, startup_timeout_s=startup_timeout_s
        ),
    )


# -- what each run records of the machine ----------------------------------------------------
def installed_vllm_version(vllm_executable: str) -> str | None:
    """The vLLM version ``vllm_executable`` runs (its own Python, without importing vLLM);
    ``None`` where it cannot tell (recorded as unknown, never a failure)."""
    python = python_for_vllm(vllm_executable)
    if python is None:
        return None
    try:
        return vllm_dist_version(python)
    except IntrospectError:
        return None


def vllm_reproducer(
    vllm_executable: str,
    nvml: LocalGpu | None,
    *,
    launch_env: Mapping[str, str],
    inherited_env: Mapping[str, str],
) -> MachineReproducer:
    """Each run of the installed vLLM names its version, the GPU and the driver."""
    return MachineReproducer(
        launch_env=dict(launch_env),
        inherited_env=dict(inherited_env),
        version=functools.partial(installed_vllm_version, vllm_executable),
        versions=nvml.versions if nvml is not None else None,
    )


def sim_reproducer(
    gpu: str,
    *,
    launch_env: Mapping[str, str],
    inherited_env: Mapping[str, str],
    version: str = SIM_VLLM_VERSION,
) -> MachineReproducer:
    """Each run of the simulator names the vLLM it speaks (``version``: with a twin
    profile, the release it was fitted on) and its catalogue GPU."""
    return MachineReproducer(
        launch_env=dict(launch_env),
        inherited_env=dict(inherited_env),
        version=lambda: version,
        gpu_name=f"{resolve_gpu(gpu).name} (simulated)",
    )
