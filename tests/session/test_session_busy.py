"""The one record of "a restart is under way": a second one is refused in one line."""

from __future__ import annotations

import pytest

from tui.domain.errors import VtcError
from tui.session.busy import Busy


def test_a_second_hold_is_refused_and_the_first_releases_even_on_error() -> None:
    busy = Busy("a restart is already under way", "wait for it")
    with busy.hold():
        assert busy.held
        with pytest.raises(VtcError, match="already under way"), busy.hold():
            pass
        assert busy.held  # the refusal did not release the first
    assert not busy.held
    with pytest.raises(RuntimeError), busy.hold():
        raise RuntimeError("launch failed")
    assert not busy.held  # a failed restart frees the next one
