"""A run as the YAML file ``vllm serve --config FILE`` reads (written by
:func:`~tui.domain.flags.config_yaml.export_config_yaml`, which knows vLLM's expansion)."""

from __future__ import annotations

import shlex

from tui.domain.export.launch import LaunchSpec, comment_block, header_lines
from tui.domain.flags.config_yaml import export_config_yaml


def config_yaml_text(spec: LaunchSpec) -> str:
    """Comment lines about the run and how to start it, then the config mapping."""
    exported = export_config_yaml(spec.flags)
    lines = header_lines(spec)
    lines.append("start it with: vllm serve --config THIS_FILE.yaml")
    if spec.env:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(spec.env.items()))
        lines.append(f"environment: {env}")
    if exported.left_out:
        lines.append(
            "not expressible in the file, pass on the command line: "
            + shlex.join(exported.left_out)
        )
    lines += [f"note: {n}" for n in exported.notes]
    return comment_block(lines) + exported.text
