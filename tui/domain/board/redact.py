"""What the board shows of a run never carries a secret."""

from __future__ import annotations

from tui.domain.flags.secrets import scrub_secret_args
from tui.domain.results import RunRecord


def without_secret_args(run: RunRecord) -> RunRecord:
    """``run`` with any secret option removed from its flags' extra arguments.

    vtc never puts a secret on a command line, but a record can still hold one (written by
    an older version); whatever renders a run for someone to read (the board, the report,
    an export) goes through this first.
    """
    scrubbed = scrub_secret_args(run.flags.extra_args)
    if len(scrubbed.args) == len(run.flags.extra_args):
        return run
    # Built without validation: the stored flags were valid when run; only a secret goes.
    flags = run.flags.model_copy(update={"extra_args": scrubbed.args})
    return run.model_copy(update={"flags": flags})
