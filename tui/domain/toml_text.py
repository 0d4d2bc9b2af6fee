"""The one parser of TOML text vtc did not write (presets, sweep specs).

``tomllib`` recurses once per nested array or inline table, so ``a = [[[[...`` 200,000
deep is a ``RecursionError``, not the ``TOMLDecodeError`` every caller handles; here it is
that error, and a caller's one line names the file.
"""

from __future__ import annotations

import tomllib
from typing import Any


def loads_toml(text: str) -> dict[str, Any]:
    """``text`` parsed as TOML; :class:`tomllib.TOMLDecodeError` for anything it refuses."""
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise tomllib.TOMLDecodeError("nested too deep") from None
