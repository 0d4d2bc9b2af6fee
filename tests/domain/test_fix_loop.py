"""``f`` never loops: the next fix, or a stop that says why."""

from __future__ import annotations

from tui.domain.diagnosis import Diagnosis, Fix
from tui.domain.fix_loop import choose_fix
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import RunRecord, RunStatus

BASE = ServeFlags(model="m", max_model_len=30576)
LOWER = Fix(title="Lower max_model_len to 928", set={"max_model_len": 928})
UTIL = Fix(title="Raise gpu_memory_utilization to 0.95", set={"gpu_memory_utilization": 0.95})


def failed(
    run_id: int, flags: ServeFlags, *fixes: Fix, kind: str = "kv_cache_too_small"
) -> RunRecord:
    diagnosis = Diagnosis(kind=kind, summary="too small", fixes=list(fixes))  # type: ignore[arg-type]
    return RunRecord(id=run_id, label=f"#{run_id}", flags=flags, status=RunStatus.FAILED,
                     diagnosis=diagnosis)  # fmt: skip


def test_the_first_fix_of_the_latest_failure() -> None:
    choice = choose_fix([failed(1, BASE, LOWER, UTIL)])
    assert choice.fix == LOWER and choice.run is not None and choice.run.id == 1


def test_the_same_cause_after_a_fix_stops_instead_of_looping() -> None:
    first = failed(1, BASE, UTIL, LOWER)
    again = failed(2, BASE.replace(gpu_memory_utilization=0.95), UTIL.model_copy(
        update={"set": {"gpu_memory_utilization": 0.96}}))  # fmt: skip
    choice = choose_fix([first, again])
    assert choice.fix is None and "failed the same way" in choice.reason


def test_a_different_cause_after_a_fix_is_fixed_in_turn() -> None:
    first = failed(1, BASE, LOWER)
    port = Fix(title="Use port 8001", set={"port": 8001})
    then = failed(2, BASE.replace(max_model_len=928), port, kind="port_in_use")
    assert choose_fix([first, then]).fix == port


def test_a_fix_already_tried_and_failed_the_same_way_is_skipped() -> None:
    tried = failed(1, BASE.replace(gpu_memory_utilization=0.95), kind="kv_cache_too_small")
    manual = failed(2, BASE, UTIL, LOWER)  # the operator edited the form in between
    assert choose_fix([tried, manual]).fix == LOWER


def test_nothing_to_apply_says_why() -> None:
    assert choose_fix([]).reason == "No failed run on the board."
    bare = failed(1, BASE)
    assert "no suggested fix" in choose_fix([bare]).reason
