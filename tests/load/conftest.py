"""Fixtures of the load tests: the fake vLLM server (``fakes.load``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakes.load import FakeVllm, serve_fake


@pytest.fixture
def fake_vllm() -> Iterator[FakeVllm]:
    """A running fake server; ``fake.base_url`` is its ``http://127.0.0.1:PORT``."""
    with serve_fake() as fake:
        yield fake
