"""JSON text from a command line or a server's event, parsed with one failure: ``ValueError``.

``json.loads`` recurses once per nested array or object: ``--speculative-config`` of
200,000 ``[`` or an event of them is a ``RecursionError``, which no caller expects. Files
go through :func:`tui.store.bounded_read.parse_json` (which also bounds the depth first);
this is for text already in memory where only the failure's kind matters.
"""

from __future__ import annotations

import json
from typing import Any


def loads_json(text: str | bytes) -> Any:
    """``text`` parsed as JSON; ``ValueError`` for anything that is not, however deep."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deep") from None
