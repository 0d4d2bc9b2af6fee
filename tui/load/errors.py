"""The load room's operator-facing errors: one line each, all :class:`VtcError`.

They are also ``ValueError`` s, as the bad values they report were (callers that caught
``ValueError`` keep working).
"""

from __future__ import annotations

from tui.domain.errors import VtcError


class LoadError(VtcError, ValueError):
    """A load that cannot run as asked: a bad URL, an impossible workload, a bad file."""
