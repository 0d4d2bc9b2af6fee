"""A run as a shell command line: ``NAME=value ... vllm serve MODEL --flag value ...``.

Quoted with :func:`shlex.join`, so it pastes into a POSIX shell and parses back to the same
argv. Secrets are not on it: vLLM reads ``VLLM_API_KEY`` (and the Hub client ``HF_TOKEN``)
from the environment, so the header names them and the operator sets them first.
"""

from __future__ import annotations

import shlex

from tui.domain.export.launch import LaunchSpec, comment_block, header_lines


def serve_line(spec: LaunchSpec) -> str:
    """``/path/to/vllm serve MODEL --flag value ...``: what the operator runs on a real box
    (the executable by absolute path: ``PATH=<dir>:...`` on the line cannot swap it)."""
    return shlex.join([spec.executable, "serve", *spec.serve_args])


def command_text(spec: LaunchSpec) -> str:
    """Comment lines about the run, then the one command line."""
    lines = header_lines(spec)
    if spec.secret_env:
        names = " ".join(spec.secret_env)
        lines.append(f"export {names} before running (never put a secret on the command line)")
    return comment_block(lines) + command_line(spec) + "\n"


def command_line(spec: LaunchSpec) -> str:
    """The one line: ``NAME=value ... vllm serve MODEL --flag value`` (no secret on it)."""
    assignments = [f"{name}={shlex.quote(value)}" for name, value in sorted(spec.env.items())]
    return " ".join([*assignments, serve_line(spec)])
