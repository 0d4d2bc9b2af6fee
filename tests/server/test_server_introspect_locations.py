"""The introspection script finds ``make_arg_parser`` wherever a vLLM release keeps it and
says which module it read (0.33 moved it to ``entrypoints/common/cli_args.py``, no shim)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tui.server.introspect import SCRIPT

PARSER = """
def make_arg_parser(parser):
    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--watchdog-config", type=str, help="Configuration for the watchdog.")
    return parser
"""


def _fake_vllm(root: Path, module: str, version: str) -> None:
    """A package ``vllm`` with the parser at ``module`` and a dist-info of ``version``."""
    pkg = root / "vllm"
    (pkg / "utils").mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"__version__ = {version!r}\n")
    (pkg / "utils" / "__init__.py").write_text("")
    (pkg / "utils" / "argparse_utils.py").write_text(
        "import argparse\nFlexibleArgumentParser = argparse.ArgumentParser\n"
    )
    parts = module.split(".")[1:]
    where = pkg
    for part in parts[:-1]:
        where = where / part
        where.mkdir(exist_ok=True)
        (where / "__init__.py").write_text("")
    (where / f"{parts[-1]}.py").write_text(PARSER)
    dist = root / f"vllm-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")


@pytest.mark.parametrize(
    ("module", "version"),
    [
        ("vllm.entrypoints.common.cli_args", "0.33.0"),
        ("vllm.entrypoints.launchers.cli_args", "0.32.0"),
    ],
)
def test_every_known_location_is_tried_and_named(tmp_path: Path, module: str, version: str) -> None:
    _fake_vllm(tmp_path, module, version)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "dump"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["parser_module"] == module and data["vllm_version"] == version
    assert "--watchdog-config" in [o for a in data["actions"] for o in a["option_strings"]]


def test_a_vllm_with_the_parser_nowhere_known_fails_naming_the_locations(tmp_path: Path) -> None:
    _fake_vllm(tmp_path, "vllm.entrypoints.elsewhere.cli_args", "0.40.0")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "dump"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 4
    assert "make_arg_parser is in none of the known locations" in done.stderr
    assert "vllm.entrypoints.common.cli_args" in done.stderr
