"""The argument parser of every ``vtc`` command: a usage error is one line.

argparse's own ``error`` prints the whole usage block, then the error: on an 80-column
terminal that is four to eight lines before the one that says what was wrong. vtc prints
that one line (``--help`` has the rest) and exits 2 as argparse does. Subcommand
parsers inherit the class (``add_subparsers`` uses the parent's type). ``vtc-sim serve``
keeps argparse's form on purpose: it speaks as ``vllm serve`` does.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from tui.domain.inert import inert

MAX_MESSAGE = 400
"""The longest error message shown (a value from outside may be long)."""


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line on stderr, exit 2."""

    def error(self, message: str) -> NoReturn:
        """``PROG: error: MESSAGE`` on one line (inert, bounded); exit 2."""
        text = inert(" ".join(message.split()))
        if len(text) > MAX_MESSAGE:
            text = text[: MAX_MESSAGE - 1] + "…"
        sys.stderr.write(f"{self.prog}: error: {text}\n")
        sys.exit(2)
