"""Fixtures for the integration suite against the real CPU build of vLLM."""

from __future__ import annotations

import os

import pytest

from tui.server.provision import ProvisionedVllm, find_provisioned


@pytest.fixture(scope="session")
def real_vllm() -> ProvisionedVllm:
    """The provisioned vLLM venv and tiny models; skips (or fails in CI) when absent."""
    found = find_provisioned()
    if found is None:
        message = "real vLLM is not provisioned: run `vtc setup-cpu-vllm` first"
        if os.environ.get("VTC_REQUIRE_REAL_VLLM") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return found
