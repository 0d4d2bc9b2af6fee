"""The ``vllm:`` families each real vLLM registers, plain and with ``--kv-offloading-size``,
read by running its own code (``tools/vllm_metric_families.py``), equal the captures the
simulator's tests hold it to (``tests/sim/captures/vllm_families_<version>.json``; issue 19).

0.32: the provisioned CPU build; 0.33: its parser env (its wheel over that build), which can
build the engine config and the stat logger though it cannot serve.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from fakes.real_vllm import parser_env_python

from tui.server.provision import ProvisionedVllm

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from vllm_metric_families import read_families  # noqa: E402

pytestmark = pytest.mark.realvllm


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
def test_the_captured_families_are_what_the_real_vllm_registers(
    real_vllm: ProvisionedVllm, version: str
) -> None:
    python = real_vllm.python if version == "0.32.0" else parser_env_python(version)
    real = read_families(str(python), str(real_vllm.model))
    capture = ROOT / "tests" / "sim" / "captures" / f"vllm_families_{version}.json"
    assert real == json.loads(capture.read_text()), (
        f"regenerate: python tools/vllm_metric_families.py {python} {real_vllm.model} "
        f"--write {capture.relative_to(ROOT)}"
    )
