"""What it takes to run a server again, captured at launch (:class:`Reproduction`).

Built from values the caller already has (the argv it executes, the environment it passes,
the GPU sample it polls, the vLLM version it introspected), so the session calls
:func:`capture_reproduction` once per launch and stores the result on the run. Secrets are
kept by *name* only: the values of ``--api-key``/``--hf-token`` and of any variable whose
name marks a secret (:mod:`tui.domain.flags.secrets`) never reach the record.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tui.domain.flags.secrets import scrub_secret_args
from tui.domain.results import Reproduction
from tui.domain.secret_names import holds_secret
from tui.domain.telemetry import GpuSample

#: Inherited variables that change what vLLM, PyTorch, CUDA or the Hub client do. Variables
#: the launch sets itself are all kept; inherited ones only when they match these.
RELEVANT_PREFIXES: tuple[str, ...] = (
    "VLLM_",
    "CUDA_",
    "NCCL_",
    "NVIDIA_",
    "HF_",
    "HUGGING_FACE_",
    "TRANSFORMERS_",
    "TORCH_",
    "PYTORCH_",
    "TORCHINDUCTOR_",
    "TRITON_",
    "TOKENIZERS_",
    "OMP_",
    "MKL_",
)
#: vtc's own plumbing, not the operator's choice (the supervisor sets it for line-buffered
#: logs), so it is not part of the reproduction.
IGNORED: frozenset[str] = frozenset({"PYTHONUNBUFFERED"})


@dataclass(frozen=True)
class GpuFacts:
    """The accelerator a run used: model name, how many, driver and CUDA versions."""

    name: str | None = None
    count: int | None = None
    driver_version: str | None = None
    cuda_version: str | None = None


def gpu_facts(
    sample: GpuSample | None, *, driver_version: str | None = None, cuda_version: str | None = None
) -> GpuFacts:
    """:class:`GpuFacts` from a telemetry sample (names, count) and the driver's versions.

    Mixed GPUs are named together (``A100 + H100``); no sample (no driver, a CPU build)
    leaves name and count unknown rather than zero.
    """
    devices = sample.devices if sample is not None else ()
    names = list(dict.fromkeys(d.name for d in devices if d.name))
    return GpuFacts(
        name=" + ".join(names) or None,
        count=len(devices) or None,
        driver_version=driver_version,
        cuda_version=cuda_version,
    )


def local_host() -> str | None:
    """This machine's host name (``None`` when the platform cannot tell)."""
    return platform.node() or None


def capture_reproduction(
    argv: Sequence[str],
    *,
    launch_env: Mapping[str, str] | None = None,
    inherited_env: Mapping[str, str] | None = None,
    vllm_version: str | None = None,
    gpu: GpuFacts | None = None,
    host: str | None = None,
) -> Reproduction:
    """The reproduction facts of one launch.

    ``argv`` is exactly what was executed (``vllm serve MODEL ...``); a secret option in it
    is dropped and recorded as the variable vLLM reads instead. ``launch_env`` is what the
    launch set for the server (all kept, secrets by name), ``inherited_env`` the
    environment it inherited (only :data:`RELEVANT_PREFIXES`; secrets by name).
    """
    scrubbed = scrub_secret_args(argv)
    env: dict[str, str] = {}
    secrets: list[str] = list(scrubbed.secret_env)
    merged = {k: v for k, v in (inherited_env or {}).items() if k.startswith(RELEVANT_PREFIXES)}
    merged.update(launch_env or {})
    for name in sorted(merged):
        if name in IGNORED:
            continue
        if holds_secret(name, merged[name]):  # by name or by value (https://u:p@host)
            if name not in secrets:
                secrets.append(name)
        else:
            env[name] = merged[name]
    gpu = gpu or GpuFacts()
    return Reproduction(
        argv=list(scrubbed.args),
        env=env,
        secret_env=secrets,
        vllm_version=vllm_version,
        gpu_name=gpu.name,
        gpu_count=gpu.count,
        driver_version=gpu.driver_version,
        cuda_version=gpu.cuda_version,
        host=host,
    )


class MachineReproducer:
    """Captures a launch's reproduction facts on this machine (a mode builds one).

    ``launch_env``: what launches set for the server (secrets by name only); ``version``:
    the vLLM version the server runs (asked once, lazily: it may start a subprocess);
    ``versions``: the driver and CUDA versions (local NVML), ``None`` where there is no
    driver; ``gpu_name``: the name to record whatever the GPU sample says (the simulated
    GPU: before its first sample there is none, after it the sample names the real card; one
    name for both, or the demo's first run read as "other machine" beside every later one
    and was never compared with them, issue 29).
    """

    def __init__(
        self,
        *,
        launch_env: Mapping[str, str],
        inherited_env: Mapping[str, str],
        version: Callable[[], str | None],
        versions: Callable[[], tuple[str | None, str | None]] | None = None,
        gpu_name: str | None = None,
    ) -> None:
        self._launch_env = dict(launch_env)
        self._inherited = dict(inherited_env)
        self._version_fn = version
        self._version: str | None = None
        self._asked = False
        self._versions = versions
        self._gpu_name = gpu_name
        self._host = local_host()

    def capture(self, argv: Sequence[str], gpu: GpuSample | None) -> Reproduction:
        """The facts of the launch of ``argv``, with the GPU as ``gpu`` shows it (blocking)."""
        if not self._asked:
            self._asked = True
            self._version = self._version_fn()
        driver, cuda = self._versions() if self._versions is not None else (None, None)
        facts = gpu_facts(gpu, driver_version=driver, cuda_version=cuda)
        if self._gpu_name is not None:
            facts = GpuFacts(self._gpu_name, facts.count or 1, driver, cuda)
        return capture_reproduction(
            argv,
            launch_env=self._launch_env,
            inherited_env=self._inherited,
            vllm_version=self._version,
            gpu=facts,
            host=self._host,
        )
