"""The provisioned CPU build of vLLM for the realvllm tests: skipped where it is absent,
a failure where CI requires it (``VTC_REQUIRE_REAL_VLLM=1``)."""

from __future__ import annotations

import os

import pytest

from tui.server.provision import ProvisionedVllm, find_provisioned

NOT_PROVISIONED = "real vLLM is not provisioned: run `vtc setup-cpu-vllm` first"


def provisioned_vllm() -> ProvisionedVllm:
    """The provisioned vLLM (venv, python, tiny models), else skip (or fail in CI)."""
    found = find_provisioned()
    if found is None:
        if os.environ.get("VTC_REQUIRE_REAL_VLLM") == "1":
            pytest.fail(NOT_PROVISIONED)
        pytest.skip(NOT_PROVISIONED)
    return found
