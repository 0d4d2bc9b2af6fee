"""A venv that can build a newer vLLM's ``vllm serve`` parser on a machine without a GPU.

The CPU build of vLLM lags the GPU release (0.32 while 0.33 is out), yet the flag table,
the help texts and the flag oracle only need the parser. The recipe (issue 19, tried there):
take the provisioned CPU build's environment, install the ``vllm==X`` wheel into a copy of
it without its dependencies, and build the parser with ``VLLM_TARGET_DEVICE=cpu`` (without
it vLLM stops at "Failed to infer device type"). Such an env cannot serve.

The copy is an overlay, not 2.5 GB of files: a fresh venv whose ``.pth`` puts the CPU
build's ``site-packages`` after its own, so the new ``vllm`` package shadows the old one and
every dependency comes from the CPU build; a second ``.pth`` sets ``VLLM_TARGET_DEVICE=cpu``
unless the caller set it. Cached as ``<user cache>/vtc/vllm-parser-X`` with a marker
written last, so a second run costs nothing::

    python -m tui.server.parser_env 0.33.0     # prints {"python": ..., "version": ...}

Exit 0 when the env is ready, 3 when it cannot be had (no CPU build provisioned, the wheel
cannot be downloaded): the message says which, so CI can skip with it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import platformdirs

from tui.domain.errors import VtcError
from tui.server.provision import find_provisioned

MARKER = "parser-env.json"
EXIT_UNAVAILABLE = 3
_DEVICE_PTH = "import os; os.environ.setdefault('VLLM_TARGET_DEVICE', 'cpu')\n"


class ParserEnvError(VtcError):
    """The parser env of a vLLM version cannot be built here (the message says why)."""


def default_root(version: str) -> Path:
    """``<user cache>/vtc/vllm-parser-<version>`` (``$VTC_VLLM_PARSER_CACHE`` moves the parent)."""
    parent = os.environ.get("VTC_VLLM_PARSER_CACHE")
    base = Path(parent) if parent else Path(platformdirs.user_cache_dir("vtc"))
    return base / f"vllm-parser-{version}"


def find_parser_env(version: str, root: Path | None = None) -> Path | None:
    """The python of a ready parser env of ``version``, else ``None`` (never builds)."""
    where = root or default_root(version)
    try:
        data = json.loads((where / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    python = Path(str(data.get("python", "")))
    return python if data.get("version") == version and python.is_file() else None


def _run(argv: list[str], what: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1800)
    if done.returncode != 0:
        last = next((ln for ln in reversed(done.stderr.splitlines()) if ln.strip()), "")
        raise ParserEnvError(f"{what} failed (exit {done.returncode})", hint=last[-200:] or None)
    return done.stdout


def build_parser_env(version: str, root: Path | None = None) -> Path:
    """Build (or find) the parser env of vLLM ``version``; returns its python.

    Raises :class:`ParserEnvError` when the CPU build is not provisioned or the wheel
    cannot be downloaded.
    """
    where = root or default_root(version)
    found = find_parser_env(version, where)
    if found is not None:
        return found
    base = find_provisioned()
    if base is None:
        raise ParserEnvError(
            f"cannot build vLLM {version}'s parser env: the CPU build is not provisioned",
            hint="run `vtc setup-cpu-vllm` first",
        )
    if where.exists():
        shutil.rmtree(where)  # half-made: start over
    venv = where / "venv"
    _run([str(base.python), "-m", "venv", "--without-pip", str(venv)], "python -m venv")
    python = venv / "bin" / "python"
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            "reading the venv's site-packages",
        ).strip()
    )
    base_site = _run(
        [str(base.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        "reading the CPU build's site-packages",
    ).strip()
    with tempfile.TemporaryDirectory(prefix="vtc-wheel-") as tmp:
        _run(
            [
                str(base.python),
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--progress-bar",
                "off",
                "-d",
                tmp,
                f"vllm=={version}",
            ],
            f"downloading the vllm=={version} wheel",
        )
        wheels = sorted(Path(tmp).glob("vllm-*.whl"))
        if not wheels:
            raise ParserEnvError(f"pip downloaded no vllm=={version} wheel")
        _run(
            [
                str(base.python),
                "-m",
                "pip",
                "install",
                "--no-deps",
                "--no-compile",
                "--progress-bar",
                "off",
                "--target",
                str(site),
                str(wheels[0]),
            ],
            f"installing the vllm=={version} wheel",
        )
    # After the wheel: its own site-packages first, then the CPU build's for the rest.
    (site / "_vtc_cpu_build.pth").write_text(base_site + "\n", encoding="utf-8")
    (site / "_vtc_cpu_device.pth").write_text(_DEVICE_PTH, encoding="utf-8")
    marker = {"version": version, "python": str(python), "base": str(base.python)}
    (where / MARKER).write_text(json.dumps(marker), encoding="utf-8")
    return python


def main(argv: list[str]) -> int:
    """``python -m tui.server.parser_env VERSION``: build or find it, print its python."""
    if len(argv) != 1:
        print("usage: python -m tui.server.parser_env VERSION", file=sys.stderr)
        return 2
    try:
        python = build_parser_env(argv[0])
    except (ParserEnvError, subprocess.TimeoutExpired, OSError) as exc:
        print(f"vLLM {argv[0]}'s parser env is not available: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    print(json.dumps({"version": argv[0], "python": str(python)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
