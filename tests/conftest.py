"""Shared test configuration: the suite's tiers (tests/suite_tiers.py), the hypothesis
profile (tests/property_profiles.py), and the one worker that real servers share."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings
from property_profiles import FAST
from suite_tiers import TIERS, TIMED, TIMED_REASON

settings.load_profile(FAST)  # --hypothesis-profile=full (hypothesis' own option) overrides it

SERIAL = ("realvllm", "ray")
"""Markers whose tests run one at a time on one xdist worker (``--dist loadgroup``): real
servers and Ray instances measured or sized against each other must not overlap. (.ci/run's
real-vLLM lane of untimed tests runs them two at a time with ``--dist loadscope``, which
ignores the group; its ``timed`` tests run alone: tests/suite_tiers.py.)"""


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``timed`` marker, declared with its reason in tests/suite_tiers.py."""
    config.addinivalue_line("markers", f"{TIMED}: {TIMED_REASON}")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject's addopts): half again as many workers as usable cores, at
    least two. A console test spends part of its time waiting on Textual's timers, the
    simulator's clock or a child process; a third worker on two cores fills those waits
    (docs/layout.md#tests has the measured times)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(2, (usable or 1) * 3 // 2)


def pytest_report_header(config: pytest.Config) -> str | None:
    """Say which tier runs, and how to run the others, when pyproject's default is in force."""
    if config.option.markexpr == TIERS["fast"]:
        return (
            "tier: fast (pytest -m '' runs every tier; -m slow, -m ray, -m realvllm one: "
            "docs/layout.md#tests)"
        )
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put every real-server test in one xdist group; defer real-vLLM tests
    (VTC_DEFER_REAL_VLLM=1) and Ray tests (VTC_DEFER_RAY=1) where a run selects them but
    another stage runs them."""
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
