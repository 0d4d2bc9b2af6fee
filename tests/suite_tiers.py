"""The suite's tiers and their ``-m`` expressions, the one table (docs/layout.md#tests).

Each test is in exactly one tier, by its markers:

- fast: everything not in another; plain ``pytest`` runs it (pyproject's ``addopts``).
- slow: ``@pytest.mark.slow``, what cannot be made fast without checking less.
- ray: ``@pytest.mark.ray``, a local Ray instance or test cluster (the ``[ray]`` extra).
- realvllm: ``@pytest.mark.realvllm``, the real CPU build of vLLM.

``pytest -m ''`` runs every tier; ``pytest -m slow`` (``ray``, ``realvllm``) one of them.
pyproject's default ``-m`` and ``.ci/run``'s stages are these expressions; tests/test_tiers.py
checks that they partition every combination of the markers and that each is run.
"""

from __future__ import annotations

TIERS = {
    "fast": "not slow and not realvllm and not ray",
    "slow": "slow and not realvllm and not ray",
    "ray": "ray and not realvllm",
    "realvllm": "realvllm",
}
"""Each tier's ``-m`` expression; ``fast`` is pyproject's default."""

TIER_MARKERS = ("slow", "ray", "realvllm")
"""The markers that put a test out of the fast tier."""
