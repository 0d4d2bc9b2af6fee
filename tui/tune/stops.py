"""Why a sweep ends before its strategy is done: a stop, a spent budget, a failure."""

from __future__ import annotations

from tui.domain.errors import VtcError


class SweepStopped(Exception):
    """The sweep was asked to stop (the operator, a quit): it resumes later."""


class BudgetSpent(Exception):
    """The sweep's budget (server starts or wall time) is spent."""


class SweepFailed(VtcError):
    """The sweep cannot go on (e.g. no utilization starts the server)."""
