"""A run as a systemd service unit.

``ExecStart=`` is quoted by systemd's own rules (``systemd.service(5)``, "Command lines"):
a word with spaces or quotes goes in double quotes with ``\\`` escapes, ``%`` is a
specifier (written ``%%``) and ``$`` expands variables (written ``$$``). Secrets stay in
``EnvironmentFile=``, a file only root reads; the unit names them and never holds a value.
``Environment=`` expands no variables, so a ``$`` is written as itself there.
"""

from __future__ import annotations

import re

from tui.domain.export.launch import ExportOptions, LaunchSpec, comment_block, header_lines

_SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


def systemd_quote(word: str, *, expands: bool = True) -> str:
    """One word for ``ExecStart=`` (``expands``: ``$`` is doubled) or ``Environment=``.

    ``Environment=`` performs no variable expansion, so a ``$`` there stays single.
    """
    if word == ";" and expands:
        return "\\;"  # a lone ";" would separate two commands
    word = word.replace("%", "%%")
    if expands:
        word = word.replace("$", "$$")
    if word and _SAFE.match(word):
        return word
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _plain(text: str) -> str:
    """Free text for ``Description=``: one line, ``%`` specifiers escaped."""
    return " ".join(text.split()).replace("%", "%%")


def unit_name(spec: LaunchSpec) -> str:
    """``vllm-run-7.service``."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", spec.label).strip("-") or "run"
    return f"vllm-run-{slug}.service"


def systemd_text(spec: LaunchSpec, options: ExportOptions) -> str:
    """The unit file: ``[Unit]``, ``[Service]`` with ``ExecStart=``, ``[Install]``."""
    lines = header_lines(spec)
    lines.append(f"install as /etc/systemd/system/{unit_name(spec)}, then systemctl enable --now")
    if spec.secret_env:
        lines.append(
            f"put {', '.join(spec.secret_env)} in {options.env_file} (NAME=value, mode 0600)"
        )
    exec_words = [options.executable, "serve", *spec.serve_args]
    service = ["[Service]", "Type=exec"]
    # "-": the file is optional when the run had no secrets
    prefix = "" if spec.secret_env else "-"
    service.append(f"EnvironmentFile={prefix}{options.env_file}")
    service += [
        f"Environment={systemd_quote(f'{k}={v}', expands=False)}"
        for k, v in sorted(spec.env.items())
    ]
    service += [
        "ExecStart=" + " ".join(systemd_quote(w) for w in exec_words),
        "Restart=on-failure",
        "RestartSec=10",
        # vLLM drains on SIGTERM; the whole control group (its workers) is stopped with it
        "TimeoutStopSec=60",
    ]
    unit = [
        "[Unit]",
        f"Description=vLLM {_plain(spec.flags.model)} (vtc run {_plain(spec.label)})",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        *service,
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return comment_block(lines) + "\n".join(unit) + "\n"
