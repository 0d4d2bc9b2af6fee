"""The ``vtc-sim`` command: the simulator's CLI (``tui.sim.cli``), assembled here like every
entry point, with the same quiet end as ``vtc`` when its reader goes away."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from tui.app.broken_pipe import quiet_on_broken_pipe
from tui.sim.cli import run


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (``vtc-sim``)."""
    sys.exit(quiet_on_broken_pipe(lambda: run(sys.argv[1:] if argv is None else argv)))
