"""Shared test configuration: where the real CPU build of vLLM comes from."""

from __future__ import annotations

import os

import pytest

SERIAL = ("realvllm", "ray")
"""Markers whose tests run one at a time on one xdist worker (``--dist loadgroup``): real
servers and Ray instances measured or sized against each other must not overlap."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Defer real-vLLM tests (VTC_DEFER_REAL_VLLM=1) and Ray tests (VTC_DEFER_RAY=1) when CI
    runs them in their own stage; put every real-server test in one xdist group."""
    for item in items:
        if any(marker in item.keywords for marker in SERIAL):
            item.add_marker(pytest.mark.xdist_group("real-servers"))
    deferred = {
        "realvllm": (
            os.environ.get("VTC_DEFER_REAL_VLLM") == "1",
            "real-vLLM tests run in .ci/run's integration stage",
        ),
        "ray": (os.environ.get("VTC_DEFER_RAY") == "1", "Ray tests run in .ci/run's Ray stage"),
    }
    for marker, (defer, reason) in deferred.items():
        if not defer:
            continue
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)
