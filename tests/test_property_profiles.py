"""The hypothesis profiles: the README's run checks each property with a fifth of its
examples (at least ten), CI's stages with all of them (tests/property_profiles.py)."""

from __future__ import annotations

from hypothesis import settings
from property_profiles import FAST, FLOOR, FULL, examples


def test_the_full_profile_runs_each_property_s_own_count() -> None:
    full = settings.get_profile(FULL)
    assert [examples(n, full) for n in (5, 15, 60, 400)] == [5, 15, 60, 400]
    assert full.max_examples == 100  # hypothesis' own default, for properties naming none


def test_the_fast_profile_runs_a_fifth_never_fewer_than_the_floor() -> None:
    fast = settings.get_profile(FAST)
    assert [examples(n, fast) for n in (5, 15, 60, 400)] == [5, FLOOR, 12, 80]
    assert fast.max_examples < settings.get_profile(FULL).max_examples


def test_neither_profile_has_a_deadline() -> None:
    """A busy machine may keep one example waiting for the CPU: never a failure."""
    assert settings.get_profile(FAST).deadline is None
    assert settings.get_profile(FULL).deadline is None
