"""Fixtures for the integration suite against the real CPU build of vLLM."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from fakes.real_vllm import provisioned_vllm, reference_model
from fakes.supervisor import Supervisor
from realvllm_support import EventRecorder, SupervisorFactory, make_supervisor

from tui.server.provision import ProvisionedVllm


@pytest.fixture(scope="session")
def real_vllm() -> ProvisionedVllm:
    """The provisioned vLLM venv and tiny models; skips (or fails in CI) when absent."""
    found = provisioned_vllm()
    return found


@pytest.fixture(scope="session")
def reference(real_vllm: ProvisionedVllm) -> Path:
    """The compute-bound model for tests whose figures are timings (``model_small`` of
    the provisioned JSON, or ``$VTC_REFERENCE_MODEL``)."""
    return reference_model(real_vllm)


@pytest_asyncio.fixture
async def supervisors(
    real_vllm: ProvisionedVllm, tmp_path: Path
) -> AsyncIterator[SupervisorFactory]:
    """Makes supervisors of the real ``vllm`` (``make(env=..., grace_s=...)``) and closes
    every one at teardown, so a failing test never leaves a server behind."""
    made: list[Supervisor] = []

    def make(
        *, env: dict[str, str] | None = None, grace_s: float = 10.0
    ) -> tuple[Supervisor, EventRecorder]:
        recorder = EventRecorder()
        log_dir = tmp_path / f"logs-{len(made)}"
        sup = make_supervisor(real_vllm, log_dir, recorder, env=env, grace_s=grace_s)
        made.append(sup)
        return sup, recorder

    yield make
    for sup in made:
        await sup.aclose()
