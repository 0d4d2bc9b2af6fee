"""What of the flags form outlives the console: its flags, its workload, the preset it shows.

The console keeps it beside its run history whenever the form holds a valid edit, and the
next console of the same history starts from it (issue 39: relaunching reset the form), unless
the command line names its own starting point (``--preset``, ``--config``, ``--model``, a
``-- serve`` line) or a server a previous console left running is taken up (the form then
shows that server's flags). It never holds a secret: the form refuses secret values in the
environment, and secret options are taken out of the extra arguments before it is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.domain.flags.serve import ServeFlags
from tui.domain.workload import LoadSpec


@dataclass(frozen=True)
class SavedForm:
    """The form as the operator left it: ``preset`` names the preset it was loaded from
    (``None``: none, or the form no longer comes from one)."""

    flags: ServeFlags
    load: LoadSpec
    preset: str | None = None
