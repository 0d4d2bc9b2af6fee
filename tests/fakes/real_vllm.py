"""The provisioned CPU build of vLLM for the realvllm tests: skipped where it is absent,
a failure where CI requires it (``VTC_REQUIRE_REAL_VLLM=1``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tui.server.parser_env import find_parser_env
from tui.server.provision import ProvisionedVllm, find_provisioned

NOT_PROVISIONED = "real vLLM is not provisioned: run `vtc setup-cpu-vllm` first"

STARTUP_GUARD_S = 600.0
"""The startup timeout of a real-vLLM test's server: a good start takes ~21 s on an idle
2-core machine and took 173 s beside the suite's other work (load 11); only a hang waits
this long. The tests wait on the start's own events (Ready, Failed), never on a speed."""
SETTLE_GUARD_S = STARTUP_GUARD_S + 30.0
"""How long a test waits for a start to be decided: the server's own timeout fires first."""
ENV_REFERENCE_MODEL = "VTC_REFERENCE_MODEL"
"""A model directory to judge timings against in place of the provisioned small Llama."""


def provisioned_vllm() -> ProvisionedVllm:
    """The provisioned vLLM (venv, python, tiny models), else skip (or fail in CI)."""
    found = find_provisioned()
    if found is None:
        if os.environ.get("VTC_REQUIRE_REAL_VLLM") == "1":
            pytest.fail(NOT_PROVISIONED)
        pytest.skip(NOT_PROVISIONED)
    return found


def reference_model(found: ProvisionedVllm) -> Path:
    """The model of the tests whose figures are timings (the twin's error, agreement):
    the compute-bound small Llama (``model_small``; the tiny one is bound by Python and
    the OS scheduler, its timings noise), or ``$VTC_REFERENCE_MODEL`` when set."""
    override = os.environ.get(ENV_REFERENCE_MODEL)
    model = Path(override).expanduser().absolute() if override else found.model_small
    if not (model / "config.json").is_file():
        pytest.fail(f"the reference model {model} has no config.json")
    return model


PARSER_ENV_MISSING = (
    "vLLM {version}'s parser env is not built: run `python -m tui.server.parser_env {version}`"
)


def parser_env_python(version: str) -> Path:
    """The python of the parser env of vLLM ``version`` (a newer vLLM's parser on the CPU
    build, :mod:`tui.server.parser_env`), else skip (or fail where CI built it and says so
    with ``VTC_REQUIRE_PARSER_ENV=1``)."""
    found = find_parser_env(version)
    if found is None:
        message = PARSER_ENV_MISSING.format(version=version)
        if os.environ.get("VTC_REQUIRE_PARSER_ENV") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return found
