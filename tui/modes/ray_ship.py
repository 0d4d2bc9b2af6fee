"""vtc shipped to a cluster's nodes: its code and the Python packages a trial imports there.

A node joined to the cluster needs Ray (``pip install 'ray[default]'``, the same version as
the head: Ray's own rule) and, for real trials, its vLLM; it need not have vtc. Each of the
sweep's workers runs in a ``runtime_env`` (Ray's own way to ship code and dependencies):

- ``py_modules``: the head's ``tui`` package, so every worker runs the head's very code
  (a node that has another vtc installed runs the head's, not its own), always: the head
  joins the cluster with it (Ray uploads a local package for a whole job only);
- ``pip``, given to each worker when a node lacks them: the packages the node's side of a
  trial imports (the worker, its session, the simulator, the load process), pinned to the
  versions the head runs. They are vtc's own dependencies (``pyproject.toml``, read from the
  installed metadata, declared once there) less those only the head uses (:data:`HEAD_ONLY`:
  the console, the search's optimizer). Ray installs them once per node in a virtualenv
  cloned from the node's Python (the ``virtualenv`` package comes with ``ray[default]``);
  the worker, and the processes it starts, run that Python.

Before a sweep starts, :func:`shipped_env` runs a small task on every alive GPU node
(importing what a trial imports) with the code alone; only when a node lacks the packages
are they shipped too (checked the same way, installing them meanwhile). A node that cannot
build that environment (no package index, another Python) refuses the sweep in one line,
with Ray's reason, instead of failing each trial later. A node that joins later gets the
environment chosen then. A local instance (``--ray`` without an address) runs on this
machine's Python, which has vtc: nothing is shipped.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ray
import ray.exceptions
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import tui
from tui.modes.options import SetupError

DISTRIBUTION = "vtc"
HEAD_ONLY = frozenset({"textual", "textual-plotext", "optuna"})
"""vtc's dependencies the nodes never import: the console, the search strategy's optimizer
(both run on the head only)."""
WORKER_MODULES = ("tui.modes.ray_host", "tui.sim.__main__", "tui.load.worker", "tui.server.relay")
"""What the node's side of a trial imports: the worker, and the simulator, load and log relay
processes it starts."""
CHECK_DEADLINE_S = 900.0  # a node's first check installs the packages: minutes, not hours
EXCLUDES = ["__pycache__", "*.pyc"]
PIP_OPTIONS = ["--disable-pip-version-check", "--no-cache-dir", "--no-compile"]
"""Ray's own options, and no bytecode compiled ahead (most of an install's time for numpy
and scipy; Python compiles what a trial imports as it imports it)."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")


def worker_requirements() -> list[str]:
    """The node's packages, pinned to the head's versions (``name==version``). Raises
    :class:`SetupError` when vtc is not installed here (its metadata names them)."""
    try:
        requires = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise SetupError(
            "Ray: vtc's dependencies cannot be shipped to the nodes: vtc is not installed "
            "on the head",
            hint="pip install -e '.[ray]' in the head's environment",
        ) from exc
    pinned = []
    for line in requires:
        if ";" in line:  # an extra's (test, ray): never the node's
            continue
        match = _NAME.match(line.strip())
        if match is None or _canonical(match.group()) in HEAD_ONLY:
            continue
        name = match.group()
        pinned.append(f"{name}=={importlib.metadata.version(name)}")
    return sorted(pinned)


def code_env() -> dict[str, Any]:
    """The head's ``tui`` package, shipped (no packages)."""
    return {"py_modules": [str(Path(tui.__file__).parent)], "excludes": EXCLUDES}


def packages_env() -> dict[str, Any]:
    """The node's packages (see the module's doc), added to the job's code per worker."""
    return {
        "pip": {
            "packages": worker_requirements(),
            "pip_check": False,
            "pip_install_options": PIP_OPTIONS,
        }
    }


def node_check() -> str:
    """Run on a node: import what a trial imports there; where it ran (its Python)."""
    import importlib
    import sys

    for module in WORKER_MODULES:
        importlib.import_module(module)
    return sys.executable


def shipped_env(
    node_gpus: Mapping[str, float], deadline_s: float = CHECK_DEADLINE_S
) -> dict[str, Any]:
    """What the sweep's workers get on a joined cluster besides the job's code (the head
    joined with :func:`code_env`: Ray uploads a local package only for a whole job), blocking.

    Nothing more when every alive GPU node already imports what a trial imports (vtc's
    packages installed there); else the packages, installed by Ray on each node (the first
    time: minutes). Raises :class:`SetupError` naming a node that cannot run a trial even
    then, and why: said before the sweep starts.
    """
    if not failures(node_gpus, {}, deadline_s):
        return {}
    env = packages_env()
    failed = failures(node_gpus, env, deadline_s)
    if failed:
        node, why = next(iter(failed.items()))
        raise SetupError(
            f"Ray: node {node[:6]} cannot run vtc's trials: {why}",
            hint="the node needs pip install 'ray[default]' (the head's version, its Python) "
            "and a package index its pip can reach",
        )
    return env


def failures(
    node_gpus: Mapping[str, float], env: dict[str, Any], deadline_s: float
) -> dict[str, str]:
    """Each alive GPU node that cannot import a trial's code with ``env`` added to the
    job's -> why (blocking, bounded by ``deadline_s`` in all)."""
    check = ray.remote(num_cpus=0)(node_check)
    refs = {
        node: check.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            runtime_env=env or None,
        ).remote()
        for node, gpus in node_gpus.items()
        if gpus > 0
    }
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=deadline_s)
    failed: dict[str, str] = {}
    for node, ref in refs.items():
        if ref not in ready:
            ray.cancel(ref, force=True)
            failed[node] = f"its environment was not set up within {deadline_s:g} s"
            continue
        try:
            ray.get(ref)
        except (ray.exceptions.RayError, ImportError) as exc:
            failed[node] = _first_line(exc)
    return failed


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _first_line(exc: BaseException) -> str:
    """The line of Ray's error that says why (its last non-empty one: the cause)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1][:200] if lines else type(exc).__name__
