"""``vtc stop``: the server a console started and left running, stopped through its state file
(its whole tree, SIGTERM then SIGKILL), the file removed."""

from __future__ import annotations

from dataclasses import dataclass

from tui.server.process import (
    STOP_GRACE_S,
    ProcessInfo,
    TerminationReport,
    group_members,
    snapshot_tree,
    terminate_tree,
)
from tui.server.state_keeper import check_record
from tui.store.server_state import ServerStateError, ServerStateFile, ServerStateRecord


# -- vtc stop -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class StopOutcome:
    """What ``vtc stop`` did."""

    stopped: bool
    message: str
    record: ServerStateRecord | None = None
    report: TerminationReport | None = None
    watched_by: int | None = None  # the pid of a live console watching it (it records the end)


def stop_recorded_server(file: ServerStateFile, *, grace_s: float = STOP_GRACE_S) -> StopOutcome:
    """Stop the server ``file`` records (its whole tree) and remove the file.

    A stale file (the process gone, or its pid now another process's) is removed and
    nothing is signalled. Blocking (up to ``grace_s`` plus a few seconds).
    """
    inspection_notice = ""
    try:
        record = file.read()
    except ServerStateError as exc:
        file.remove()
        return StopOutcome(False, f"no server started by vtc is running (removed: {exc})")
    if record is None:
        return StopOutcome(False, "no server started by vtc is running")
    check = check_record(record)
    if not check.running:
        file.remove(pid=record.pid)
        return StopOutcome(
            False,
            f"no server started by vtc is running (removed a stale state file: {check.reason})",
            record,
        )
    if check.console_pid is not None:
        inspection_notice = f"; the vtc console (pid {check.console_pid}) watching it sees it stop"
    root = ProcessInfo(pid=record.pid, create_time=record.create_time)
    known: dict[tuple[int, float], ProcessInfo] = {(root.pid, root.create_time): root}
    for info in [*snapshot_tree(record.pid), *group_members(record.pgid)]:
        known.setdefault((info.pid, info.create_time), info)
    report = terminate_tree(record.pgid, list(known.values()), grace_s=grace_s)
    file.remove(pid=record.pid)
    how = f"SIGKILL after {grace_s:g} s" if report.escalated else "SIGTERM"
    if report.survivors:
        names = ", ".join(f"{p.pid} ({p.name})" for p in report.survivors)
        return StopOutcome(
            False,
            f"signalled pid {record.pid} at {record.base_url} ({how}), but these survived "
            f"SIGKILL: {names}",
            record,
            report,
        )
    return StopOutcome(
        True,
        f"stopped the server vtc started: pid {record.pid} at {record.base_url} "
        f"({how}, {len(report.signalled)} process(es)){inspection_notice}",
        record,
        report,
        check.console_pid,
    )
