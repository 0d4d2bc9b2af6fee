"""What every export of a run starts from: its flags, environment and secrets, cleaned.

:func:`launch_spec` reads a :class:`~tui.domain.results.RunRecord` once and hands each
writer (command, config YAML, compose, systemd, Kubernetes) the same facts. Secrets are
*names* here by construction: a secret option left in the flags' extra arguments is
removed, and a variable whose name marks a secret keeps its name and loses its value, even
if an older record stored one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from tui.domain.board.baseline import run_label
from tui.domain.board.metrics import OUTPUT_THROUGHPUT, TTFT_P99
from tui.domain.errors import VtcError
from tui.domain.flags.secrets import scrub_secret_args
from tui.domain.flags.serve import ServeFlags
from tui.domain.inert import inert
from tui.domain.results import RunRecord
from tui.domain.secret_names import holds_secret
from tui.domain.vllm_release import IMAGE

# a release, optionally with a local build tag (0.32.0+cpu); pre-releases and dev builds
# (0.33.0rc1.dev12+g...) have no published image
_RELEASE = re.compile(r"^(\d+\.\d+\.\d+(?:\.post\d+)?)(?:\+[\w.]+)?$")


@dataclass(frozen=True)
class ExportOptions:
    """Where the exported server will live (defaults suit a fresh GPU host)."""

    executable: str = "/usr/local/bin/vllm"  # systemd: the absolute path of vllm
    env_file: str = "/etc/vllm/vllm.env"  # systemd: where the secrets are kept
    hf_cache: str = "${HOME}/.cache/huggingface"  # compose: the host's Hub cache
    shm_size: str = "16gb"  # compose /dev/shm (vLLM's docs: --ipc=host or --shm-size)
    k8s_secret: str = "vllm-secrets"  # Kubernetes Secret holding the secret variables
    k8s_cache_claim: str = "vllm-hf-cache"  # Kubernetes PVC for the Hub cache
    demo: bool = False  # the run was measured on vtc's simulator


@dataclass(frozen=True)
class LaunchSpec:
    """One run, ready to be written out: nothing here holds a secret value."""

    run: RunRecord
    label: str
    flags: ServeFlags
    env: dict[str, str]
    secret_env: tuple[str, ...]
    vllm_version: str | None
    image: str
    image_note: str | None
    gpus: int
    port: int
    notes: tuple[str, ...]
    executable: str = "vllm"  # absolute when recorded or when the env sets PATH

    @property
    def serve_args(self) -> list[str]:
        """The arguments after ``vllm serve``: MODEL first, then the set flags."""
        return self.flags.to_argv()


def image_for(version: str | None) -> tuple[str, str | None]:
    """The image of vLLM ``version`` and a note when it is a guess."""
    if not version:
        return f"{IMAGE}:latest", "vLLM version not recorded: pin the image tag yourself"
    match = _RELEASE.match(version)
    if match is None:
        return f"{IMAGE}:latest", f"vLLM {version} has no published image: pin a tag yourself"
    tag = f"{IMAGE}:v{match.group(1)}"
    if match.group(1) != version:
        return tag, f"recorded on vLLM {version}; the published GPU image of the release is used"
    return tag, None


class ExportRefused(VtcError):
    """A run that cannot be written out as it ran (one line: which value, and why)."""


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def refuse_control_characters(argv: list[str], env: dict[str, str]) -> None:
    """Refuse, with one line, an argument or variable holding a control character: no
    shell, YAML or unit file writes it so that it reads back as the run used it."""
    for where, value in [*(("argument", a) for a in argv), *env.items()]:
        if _CONTROL.search(value):
            raise ExportRefused(
                f"cannot export this run: {inert(where)[:60]} holds a control character "
                f"({_CONTROL.search(value).group()!r})"  # type: ignore[union-attr]
            )


def executable_of(run: RunRecord, options: ExportOptions, env: dict[str, str]) -> str:
    """The vllm the run executed: its recorded argv[0] when that is an absolute ``vllm``;
    else, when the exported environment sets ``PATH``, :attr:`ExportOptions.executable` (a
    bare ``vllm`` would be looked up in that ``PATH`` and could run another one); else the
    bare ``vllm`` the operator's own shell finds (nothing in the export can swap it)."""
    argv = run.repro.argv if run.repro is not None else []
    first = argv[0] if argv else ""
    if first.startswith("/") and first.rsplit("/", 1)[-1] == "vllm":
        return first
    return options.executable if "PATH" in env else "vllm"


def launch_spec(run: RunRecord, options: ExportOptions | None = None) -> LaunchSpec:
    """The cleaned launch facts of ``run``."""
    options = options or ExportOptions()
    scrubbed = scrub_secret_args(run.flags.extra_args)
    flags = run.flags.replace(extra_args=scrubbed.args) if scrubbed.secret_env else run.flags
    repro = run.repro
    secrets = list(scrubbed.secret_env)
    env: dict[str, str] = {}
    for name in repro.secret_env if repro is not None else ():
        if name not in secrets:
            secrets.append(name)
    # what the launch recorded, then the run's own environment (its configuration) over it
    recorded = repro.env if repro is not None else {}
    for name, value in [*recorded.items(), *flags.env]:
        if not holds_secret(name, value):  # by name, or by value (https://u:p@host, a DSN)
            env[name] = value
        elif name not in secrets:
            secrets.append(name)
    refuse_control_characters(flags.to_argv(), env)
    version = repro.vllm_version if repro is not None else None
    image, image_note = image_for(version)
    notes: list[str] = []
    if run.diagnosis is not None:
        notes.append(f"this start failed ({run.diagnosis.kind}): {run.diagnosis.summary}")
    if options.demo:
        notes.insert(0, "measured on vtc's simulator (demo): the numbers are not a real vLLM's")
    if flags.host not in (None, "", "0.0.0.0", "::"):
        notes.append(f"--host {flags.host}: a container listening there is unreachable")
    return LaunchSpec(
        executable=executable_of(run, options, env),
        run=run,
        label=run_label(run),
        flags=flags,
        env=env,
        secret_env=tuple(secrets),
        vllm_version=version,
        image=image,
        image_note=image_note,
        gpus=int(flags.effective("tensor_parallel_size"))
        * int(flags.effective("pipeline_parallel_size")),
        port=flags.effective_port,
        notes=tuple(notes),
    )


def header_lines(spec: LaunchSpec, *, container: bool = False) -> list[str]:
    """What the run was, as comment lines (without the comment marker).

    ``container``: the export runs vLLM's image, so a note on its tag belongs here.
    """
    run = spec.run
    lines = [f"vtc run {spec.label} ({run.status.value}), {run.created_at:%Y-%m-%d %H:%M} UTC"]
    repro = run.repro
    if repro is not None:
        machine = [
            f"GPU {repro.gpu_name} x{repro.gpu_count or 1}" if repro.gpu_name else None,
            f"driver {repro.driver_version}" if repro.driver_version else None,
            f"CUDA {repro.cuda_version}" if repro.cuda_version else None,
            f"vLLM {repro.vllm_version}" if repro.vllm_version else None,
            f"host {repro.host}" if repro.host else None,
        ]
        shown = [m for m in machine if m]
        if shown:
            lines.append("measured on " + ", ".join(shown))
        if repro.vllm_version:
            lines.append(f"image of that vLLM: {spec.image}")  # the tag of the version used
    tput, ttft = OUTPUT_THROUGHPUT.value(run), TTFT_P99.value(run)
    if tput is not None:
        lines.append(
            f"result: {OUTPUT_THROUGHPUT.format(tput)} output tok/s, "
            f"TTFT p99 {TTFT_P99.format(ttft)}"
        )
    if run.workload is not None:
        w = run.workload
        lines.append(
            f"workload: {w.endpoint}, input {w.input_len}, output {w.output_len}, "
            f"{w.num_prompts} prompts, concurrency {w.max_concurrency}, rate {w.request_rate}"
        )
    if spec.secret_env:
        lines.append(
            "secrets (names only; set them where this file says): " + ", ".join(spec.secret_env)
        )
    notes = [*spec.notes, spec.image_note] if container and spec.image_note else spec.notes
    lines += [f"note: {n}" for n in notes]
    return lines


class _PlainDumper(yaml.SafeDumper):
    """Writes repeated values out again instead of ``&id001`` anchors and ``*id001`` aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_yaml(document: Any) -> str:
    """``document`` as block YAML in insertion order, without anchors."""
    return yaml.dump(document, Dumper=_PlainDumper, sort_keys=False, width=100)


#: Variables a container runtime sets itself: the host's value would pick the wrong GPUs.
HOST_ONLY_ENV = frozenset({"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"})


def container_env(spec: LaunchSpec) -> dict[str, str]:
    """The non-secret environment for a container (the runtime assigns the GPUs)."""
    return {k: v for k, v in sorted(spec.env.items()) if k not in HOST_ONLY_ENV}


def comment_block(lines: list[str], marker: str = "#") -> str:
    """``lines`` as comment lines, each starting with ``marker``."""
    # one physical line each, whatever a recorded fact holds: a newline would end the comment
    return "".join(f"{marker} {' '.join(line.split())}\n" for line in lines)
