"""Headless output into a pipe that closes early (``vtc runs --json | head``).

When the reader goes away, the next write raises ``BrokenPipeError``: the command has
nothing left to do but end, quietly, with the shell's status for a process killed by
SIGPIPE (128 + 13), as ``cat`` or ``ls`` would. Standard output is pointed at
``/dev/null`` first, so the interpreter's final flush cannot fail again and print
"Exception ignored ... BrokenPipeError" (the recipe of Python's ``signal`` documentation).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable

EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
"""What a shell reports for a command whose reader went away (141 on Linux)."""


def quiet_on_broken_pipe(command: Callable[[], int]) -> int:
    """Run ``command``; a reader that went away ends it with :data:`EXIT_BROKEN_PIPE`."""
    try:
        try:
            code = command()
        finally:  # argparse's --help ends in SystemExit with its text still buffered
            sys.stdout.flush()  # the last bytes meet a closed pipe here, not at exit
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    return code


def _silence_stdout() -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
