"""A service's "one at a time" state: the single record of it, and its refusal.

The console keeps no busy flag of its own: it asks, and shows the service's refusal.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tui.domain.errors import VtcError


class Busy:
    """Whether one operation (a restart) is under way; a second one is refused."""

    def __init__(self, refusal: str, hint: str = "") -> None:
        self._refusal, self._hint = refusal, hint
        self._held = False

    @property
    def held(self) -> bool:
        """Whether the operation is under way."""
        return self._held

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Hold for the operation's length; raises ``VtcError`` (one line) when already held."""
        if self._held:
            raise VtcError(self._refusal, hint=self._hint)
        self._held = True
        try:
            yield
        finally:
            self._held = False
