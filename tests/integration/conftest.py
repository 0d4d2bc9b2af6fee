"""Fixtures for the integration suite against the real CPU build of vLLM."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from fakes.real_vllm import provisioned_vllm, reference_model
from realvllm_support import ServerPool, SupervisorFactory

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


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def server_pool() -> AsyncIterator[ServerPool]:
    """Ready servers kept by one test for a later one of the same flag set (the tests that
    use it run on the session's event loop, where the servers' watchers run); those never
    taken stop at the end of the session."""
    pool = ServerPool()
    yield pool
    await pool.aclose()


@pytest_asyncio.fixture(loop_scope="session")
async def supervisors(
    real_vllm: ProvisionedVllm, tmp_path: Path, server_pool: ServerPool
) -> AsyncIterator[SupervisorFactory]:
    """Makes supervisors of the real ``vllm`` (``make(env=..., grace_s=...)``), gives ready
    servers of a flag set (``ready``) and keeps them for later tests (``keep``); closes every
    other one at teardown, so a failing test never leaves a server behind."""
    factory = SupervisorFactory(real_vllm, tmp_path, server_pool)
    yield factory
    await factory.aclose()
