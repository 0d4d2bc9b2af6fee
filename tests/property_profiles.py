"""Hypothesis profiles: fewer examples for the README's ``pytest``, every example in CI.

    pytest                                 # the "fast" profile (loaded by tests/conftest.py)
    pytest --hypothesis-profile=full       # each property's full count (.ci/run's stages)

A property states its full count with :func:`examples` (``@settings(max_examples=examples(300))``);
the fast profile runs a fifth of it, never fewer than :data:`FLOOR`. Properties that name no
count get the profile's own (100 full, 20 fast). Neither profile has a deadline: the suite
passes on a busy machine, where one example may wait seconds for the CPU.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, settings

FAST = "fast"
FULL = "full"
FULL_EXAMPLES = 100  # hypothesis' own default
FAST_EXAMPLES = 20
FLOOR = 10
"""The fewest examples a property runs in the fast profile (or its full count, if lower)."""

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile(FULL, max_examples=FULL_EXAMPLES, **_COMMON)
settings.register_profile(FAST, max_examples=FAST_EXAMPLES, **_COMMON)


def examples(full: int, profile: settings | None = None) -> int:
    """The example count for a property whose full count is ``full``, in ``profile`` (the
    loaded one by default).

    Read when the test module is imported: after the profile is chosen (tests/conftest.py
    loads "fast"; hypothesis' ``--hypothesis-profile`` option loads another at configure)."""
    scale = (profile or settings.default).max_examples / FULL_EXAMPLES
    return max(min(full, FLOOR), math.ceil(full * scale))
