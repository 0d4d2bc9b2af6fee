"""Ask an installed vLLM for its ``vllm serve`` flags, in a subprocess, cached by version.

:func:`introspect_vllm` runs ``introspect_script.py`` with the TARGET Python (the vLLM venv's
interpreter, never ours: vLLM and torch only import there) and turns its JSON into a
:class:`~tui.domain.flags.vllm_cli.VllmCli`. Importing vLLM costs ~9-15 s on a small CPU machine,
so the JSON is cached per (interpreter path, vLLM distribution version) under
``platformdirs.user_cache_dir("vtc")/introspect/``; the version probe imports no vLLM, so a
cache hit costs one ~0.1 s subprocess.

A ``vllm`` that is not a Python script vtc can reach (a wrapper, a container) is not
introspected: the console then checks extra arguments against vLLM 0.32's own table
(:mod:`tui.domain.flags.vllm_serve_options`).

Blocking calls: run them in a worker thread (``asyncio.to_thread``) from the console.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import platformdirs

from tui.domain.errors import VtcError
from tui.domain.flags.vllm_cli import CliDumpError, VllmCli

SCRIPT = Path(__file__).with_name("introspect_script.py")
SCRIPT_SCHEMA = 1
"""The dump format :data:`SCRIPT` writes; part of the cache key, bump with the script."""

VERSION_TIMEOUT_S = 30.0
_EXIT_NOT_INSTALLED = 3
_TAIL_CHARS = 2000

IntrospectErrorKind = Literal["python-missing", "vllm-missing", "failed", "timeout", "bad-output"]


class IntrospectError(VtcError):
    """vLLM's flags could not be read; ``kind`` says why, the message says what to do.

    ``python-missing``: the interpreter does not exist or cannot run; ``vllm-missing``: it has
    no vLLM installed; ``failed``: vLLM failed to import or to build its parser (``detail``
    holds the stderr tail, its last line is the hint); ``timeout``; ``bad-output``: the
    script's output was not the expected JSON.
    """

    def __init__(self, kind: IntrospectErrorKind, message: str, detail: str = "") -> None:
        last = next((line for line in reversed(detail.splitlines()) if line.strip()), "")
        super().__init__(message, hint=last[-200:] or None)
        self.kind = kind
        self.detail = detail


def default_cache_dir() -> Path:
    """``<user cache>/vtc/introspect`` (e.g. ``~/.cache/vtc/introspect``)."""
    return Path(platformdirs.user_cache_dir("vtc")) / "introspect"


@dataclass(frozen=True)
class _Result:
    returncode: int
    stdout: str
    stderr: str


def _run(argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None) -> _Result:
    """Run ``argv`` in its own process group; kill the whole group on timeout."""
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
            env=dict(env) if env is not None else None,
        )
    except OSError as exc:  # missing file, not executable, bad interpreter line
        raise IntrospectError(
            "python-missing", f"cannot run {argv[0]}: {exc.strerror or exc}"
        ) from exc
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise IntrospectError(
            "timeout",
            f"{argv[0]} took longer than {timeout_s:g} s to describe vLLM's flags",
        ) from exc
    return _Result(proc.returncode, stdout, stderr)


def _tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _TAIL_CHARS else "..." + text[-_TAIL_CHARS:]


def _script_env() -> dict[str, str]:
    env = dict(os.environ)
    # Quieter stderr; the JSON goes to stdout regardless (the script redirects fd 1).
    env.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    env.pop("PYTHONSTARTUP", None)
    return env


def _not_installed(python: str, stderr: str) -> IntrospectError:
    return IntrospectError(
        "vllm-missing",
        f"vLLM is not installed for {python} (install it there, or point vtc at the "
        "python of the venv that has it; `vtc setup-cpu-vllm` provisions the CPU build)",
        _tail(stderr),
    )


def vllm_dist_version(python: Path | str, *, timeout_s: float = VERSION_TIMEOUT_S) -> str:
    """The installed vLLM distribution version (``0.32.0+cpu``), without importing vLLM."""
    py = os.fspath(python)
    result = _run([py, str(SCRIPT), "version"], timeout_s, _script_env())
    if result.returncode == _EXIT_NOT_INSTALLED:
        raise _not_installed(py, result.stderr)
    if result.returncode != 0:
        raise IntrospectError(
            "python-missing" if result.returncode in (126, 127) else "failed",
            f"{py} could not report the vLLM version (exit {result.returncode})",
            _tail(result.stderr),
        )
    try:
        data = json.loads(result.stdout)
        version = data["dist_version"]
    except (ValueError, KeyError, TypeError) as exc:
        raise IntrospectError(
            "bad-output", f"{py}: unexpected version output {result.stdout[:200]!r}"
        ) from exc
    if not isinstance(version, str) or not version:
        raise IntrospectError("bad-output", f"{py}: empty vLLM version")
    return version


def cache_path(cache_dir: Path, python: str, dist_version: str) -> Path:
    """Where the dump of (``python``, ``dist_version``) is cached.

    The interpreter path is made absolute but symlinks are NOT resolved: every venv's
    ``bin/python`` links to the same base interpreter.
    """
    key = json.dumps([os.path.abspath(python), dist_version, SCRIPT_SCHEMA])
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    safe_version = "".join(c if c.isalnum() or c in ".+-" else "_" for c in dist_version)
    return cache_dir / f"vllm-{safe_version}-{digest}.json"


def _read_cache(path: Path, python: str, dist_version: str) -> VllmCli | None:
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict):
        return None
    if entry.get("python") != os.path.abspath(python) or entry.get("dist_version") != (
        dist_version
    ):
        return None
    try:
        return VllmCli.from_json(entry.get("dump") or {})
    except CliDumpError:
        return None


def _write_cache(path: Path, python: str, dist_version: str, dump: Mapping[str, Any]) -> None:
    entry = {"python": os.path.abspath(python), "dist_version": dist_version, "dump": dump}
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(entry, fh)
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the new one
    except OSError:
        # A read-only cache only costs the next caller another introspection.
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def dump_vllm_cli(python: Path | str, *, timeout_s: float = 120.0) -> dict[str, Any]:
    """Run the introspection script with ``python`` and return its JSON (no cache)."""
    py = os.fspath(python)
    result = _run([py, str(SCRIPT), "dump"], timeout_s, _script_env())
    if result.returncode == _EXIT_NOT_INSTALLED:
        raise _not_installed(py, result.stderr)
    if result.returncode != 0:
        raise IntrospectError(
            "python-missing" if result.returncode in (126, 127) else "failed",
            f"vLLM failed to build its serve parser under {py} (exit {result.returncode})",
            _tail(result.stderr),
        )
    try:
        data = json.loads(result.stdout)
    except ValueError as exc:
        raise IntrospectError(
            "bad-output",
            f"{py}: the introspection output is not JSON: {result.stdout[:200]!r}",
            _tail(result.stderr),
        ) from exc
    if not isinstance(data, dict) or data.get("schema") != SCRIPT_SCHEMA:
        raise IntrospectError(
            "bad-output", f"{py}: unexpected introspection format (schema != {SCRIPT_SCHEMA})"
        )
    return data


def introspect_vllm(
    python: Path | str,
    *,
    cache_dir: Path | None = None,
    timeout_s: float = 120.0,
    refresh: bool = False,
) -> VllmCli:
    """Every ``vllm serve`` flag of the vLLM installed for ``python``.

    Cached by (``python`` path, vLLM distribution version) in ``cache_dir`` (default
    :func:`default_cache_dir`); ``refresh`` ignores an existing entry. Raises
    :class:`IntrospectError`.
    """
    py = os.fspath(python)
    directory = cache_dir if cache_dir is not None else default_cache_dir()
    version = vllm_dist_version(py, timeout_s=min(timeout_s, VERSION_TIMEOUT_S))
    path = cache_path(directory, py, version)
    if not refresh:
        cached = _read_cache(path, py, version)
        if cached is not None:
            return cached
    data = dump_vllm_cli(py, timeout_s=timeout_s)
    try:
        cli = VllmCli.from_json(data)
    except CliDumpError as exc:
        raise IntrospectError("bad-output", f"{py}: {exc}") from exc
    _write_cache(path, py, version, data)
    return cli


def python_for_vllm(vllm_executable: Path | str) -> Path | None:
    """The interpreter behind a ``vllm`` console script: its ``#!`` line, else a sibling.

    ``None`` when neither names an existing file (e.g. a wrapper shell script).
    """
    exe = Path(vllm_executable)
    try:
        with exe.open("rb") as fh:
            first = fh.readline(512).decode("utf-8", "replace").strip()
    except OSError:
        first = ""
    if first.startswith("#!"):
        parts = first[2:].split()
        if parts and "python" in Path(parts[0]).name and Path(parts[0]).is_file():
            return Path(parts[0])
    for name in ("python", "python3"):
        sibling = exe.parent / name
        if sibling.is_file():
            return sibling
    return None
