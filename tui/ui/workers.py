"""The one way the console runs a session command off its loop: a guarded worker.

Every command the operator starts (restart, load, stop, repeat, export, a sweep's stop...)
runs in a worker; a refusal or failure of the service becomes one notification line, and
the console stays up. The services keep the busy state (a load running, a restart under
way) and refuse a second one: the console shows their refusal, it keeps no flag of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from textual.widget import Widget

from tui.domain.errors import one_line, retry_line

FAILURE_TIMEOUT_S = 10.0


def run_guarded(
    node: Widget,
    what: str,
    job: Callable[[], Awaitable[object]],
    group: str | None = None,
    *,
    key: str = "",
) -> None:
    """Run ``job`` in a worker of ``node``; a failure is one line titled ``{what} failed``.

    ``group``: the worker group (default: ``what`` in lower case), so a screen's workers of
    one kind can be found or cancelled together. ``key``: the key that runs it again, named
    when a busy history file made it fail (``retry_line``).
    """

    async def guarded() -> None:
        try:
            await job()
        except Exception as exc:  # the console reports (one line) and stays up
            text = retry_line(exc, key) if key else one_line(exc)
            node.notify(text, title=f"{what} failed", severity="error", timeout=FAILURE_TIMEOUT_S)

    node.run_worker(guarded(), group=group or what.lower(), exit_on_error=False, description=what)
