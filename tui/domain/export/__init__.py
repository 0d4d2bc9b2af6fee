"""Export a run so it can be run again elsewhere: ``vtc export RUN --as FORMAT``.

Formats: ``command`` (a shell line), ``yaml`` (``vllm serve --config``), ``compose`` (a
Docker Compose service), ``systemd`` (a unit file), ``k8s`` (a Deployment). Every one is
rendered from the same :class:`~.launch.LaunchSpec`, in which secrets are names only: an
export refers to them (``${VLLM_API_KEY}``, ``EnvironmentFile=``, ``secretKeyRef``) and
never holds a value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

from tui.domain.board.baseline import run_label
from tui.domain.export.command import command_text
from tui.domain.export.compose import compose_text
from tui.domain.export.config_yaml import config_yaml_text
from tui.domain.export.k8s import deployment_name, k8s_text
from tui.domain.export.launch import ExportOptions, LaunchSpec, launch_spec
from tui.domain.export.systemd import systemd_text, unit_name
from tui.domain.results import RunRecord

ExportFormat = Literal["command", "yaml", "compose", "systemd", "k8s"]
EXPORT_FORMATS: tuple[str, ...] = get_args(ExportFormat)


@dataclass(frozen=True)
class ExportedFile:
    """An export's text and the file name it would usually be saved as."""

    text: str
    filename: str


_WRITERS: dict[str, tuple[Callable[[LaunchSpec, ExportOptions], str], Callable[[LaunchSpec], str]]]
_WRITERS = {
    "command": (lambda s, _o: command_text(s), lambda s: f"vllm-run-{_slug(s)}.sh"),
    "yaml": (lambda s, _o: config_yaml_text(s), lambda s: f"vllm-run-{_slug(s)}.yaml"),
    "compose": (compose_text, lambda s: "compose.yaml"),
    "systemd": (systemd_text, unit_name),
    "k8s": (k8s_text, lambda s: f"{deployment_name(s)}.yaml"),
}


def _slug(spec: LaunchSpec) -> str:
    return "".join(ch for ch in run_label(spec.run) if ch.isalnum()) or "run"


def export_run(run: RunRecord, fmt: str, options: ExportOptions | None = None) -> ExportedFile:
    """``run`` written as ``fmt``; ``ValueError`` for an unknown format (the CLI prevents it)."""
    if fmt not in _WRITERS:
        raise ValueError(f"unknown export format {fmt!r}: choose from {', '.join(EXPORT_FORMATS)}")
    options = options or ExportOptions()
    spec = launch_spec(run, options)
    write, name = _WRITERS[fmt]
    return ExportedFile(write(spec, options), name(spec))
