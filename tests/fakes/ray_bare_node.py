"""A Python environment with Ray and nothing of vtc: what a fresh GPU node has.

Built once (``python -m venv`` from this interpreter's base Python, then
``pip install 'ray[default]==<this Ray>'``: a node needs the head's Ray and Python, and
``ray[default]`` brings the ``virtualenv`` package Ray's ``pip`` runtime environment needs)
in ``~/.cache/vtc/ray-node-<ray>-py<major.minor>``, under a lock so parallel sessions build
it once; a marker file is written last, so a half-built one is built again. Where it cannot
be built (no package index, offline), :func:`bare_node_python` says why and the test
skips with that reason.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import ray

READY = "vtc-ready"
INSTALL_TIMEOUT_S = 900


def _cache() -> Path:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    return Path.home() / ".cache" / "vtc" / f"ray-node-{ray.__version__}-py{version}"


def bare_node_python() -> tuple[Path | None, str]:
    """The bare environment's Python (built if needed), or ``None`` and why not."""
    folder = _cache()
    folder.parent.mkdir(parents=True, exist_ok=True)
    with (folder.parent / f"{folder.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        python = folder / "bin" / "python"
        if (folder / READY).exists() and python.exists():
            return python, ""
        shutil.rmtree(folder, ignore_errors=True)
        base = getattr(sys, "_base_executable", sys.executable)
        steps = [
            [base, "-m", "venv", str(folder)],
            [str(python), "-m", "pip", "install", "-q", f"ray[default]=={ray.__version__}"],
        ]
        for step in steps:
            done = subprocess.run(
                step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
            )
            if done.returncode != 0:
                shutil.rmtree(folder, ignore_errors=True)
                said = (done.stderr or done.stdout).strip().splitlines()
                return None, f"{' '.join(step[:4])} failed: {said[-1] if said else ''}"
        (folder / READY).write_text(f"ray[default]=={ray.__version__}\n", encoding="utf-8")
        return python, ""


def lacks(python: Path, module: str) -> bool:
    """Whether ``python`` cannot import ``module`` (run away from any checkout)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(python), "-c", f"import {module}"],
        capture_output=True,
        timeout=120,
        check=False,
        cwd=Path.home(),
        env=env,
    )
    return done.returncode != 0
