"""``python -m tui.cli``: the ``vtc`` command, assembled in the composition root (``tui.app``)."""

from __future__ import annotations

import sys

from tui.app.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
