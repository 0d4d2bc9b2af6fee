"""The suite's tiers and their ``-m`` expressions, the one table (docs/layout.md#tests).

Each test is in exactly one tier, by its markers:

- fast: everything not in another; plain ``pytest`` runs it (pyproject's ``addopts``).
- slow: ``@pytest.mark.slow``, what cannot be made fast without checking less.
- ray: ``@pytest.mark.ray``, a local Ray instance or test cluster (the ``[ray]`` extra).
- realvllm: ``@pytest.mark.realvllm``, the real CPU build of vLLM.

``pytest -m ''`` runs every tier; ``pytest -m slow`` (``ray``, ``realvllm``) one of them.
pyproject's default ``-m`` and ``.ci/run``'s stages are these expressions; tests/test_tiers.py
checks that they partition every combination of the markers and that each is run.

The real-vLLM tier runs in two lanes (``REALVLLM_LANES``): its ``@pytest.mark.timed`` tests one
at a time, the rest two at a time. Both lanes together are the tier, each test in one lane.
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

TIMED = "timed"
"""The marker of a real-vLLM test whose assertions read a measured time or rate."""

TIMED_REASON = (
    "a real-vLLM test whose assertions read measured times or rates (a twin's error, two "
    "loads' agreement, a latency, a rate against the server's counters, an SLO search): "
    "another server on the same cores would move them, so .ci/run runs it one at a time, "
    "beside no other server"
)
"""Why the ``timed`` marker exists: what its tests assert and what that asks of the run
(registered with pytest from here, tests/conftest.py)."""

REALVLLM_LANES = {
    "realvllm, two at a time": f"realvllm and not {TIMED}",
    "realvllm, timed, one at a time": f"realvllm and {TIMED}",
}
"""The real-vLLM tier's two lanes, each a ``.ci/run`` pytest run: what times nothing (failed
starts and their fixes, the parser oracle, diagnoses, orphans, sweeps whose SLO no run can
miss) on two workers, two servers at once; the ``timed`` tests on one, alone."""
