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
    return RunRecord(
        id=run_id, label=f"#{run_id}", flags=flags, status=RunStatus.FAILED, diagnosis=diagnosis
    )


def test_the_first_fix_of_the_latest_failure() -> None:
    choice = choose_fix([failed(1, BASE, LOWER, UTIL)])
    assert choice.fix == LOWER and choice.run is not None and choice.run.id == 1


def test_the_same_cause_after_a_fix_takes_the_first_failures_next_fix_not_its_own() -> None:
    first = failed(1, BASE, UTIL, LOWER)
    again = failed(
        2,
        BASE.replace(gpu_memory_utilization=0.95),
        UTIL.model_copy(update={"set": {"gpu_memory_utilization": 0.96}}),
    )
    choice = choose_fix([first, again])
    assert choice.fix == LOWER and choice.run is first
    # the failed attempt is undone in the form: utilization back to the first run's
    assert choice.settings == {"max_model_len": 928, "gpu_memory_utilization": None}
    last = failed(
        3,
        BASE.replace(max_model_len=928),
        UTIL.model_copy(update={"set": {"gpu_memory_utilization": 0.97}}),
    )
    stop = choose_fix([first, again, last])
    assert stop.fix is None and "every fix offered since was tried" in stop.reason


TP2 = Fix(title="Split the weights over 2 GPUs", set={"tensor_parallel_size": 2})
FP8 = Fix(title="Quantize the weights to fp8 on load", set={"quantization": "fp8"})
TP1 = Fix(title="Set tensor_parallel_size back to 1", set={"tensor_parallel_size": 1})


def test_a_fix_that_failed_another_way_leads_to_the_next_untried_fix() -> None:
    """Issue 17: split over 2 GPUs failed with world size 2 > 1; f takes fp8, not a dead end."""
    oom = failed(7, BASE, TP2, FP8, kind="weights_oom")
    world = failed(8, BASE.replace(tensor_parallel_size=2), TP1, kind="world_size_exceeds_gpus")
    choice = choose_fix([oom, world])
    assert choice.fix == FP8 and choice.run is oom
    assert choice.settings == {"quantization": "fp8", "tensor_parallel_size": None}
    served = BASE.replace(quantization="fp8")
    assert oom.flags.replace(**choice.settings) == served


def test_a_world_size_failure_without_a_parent_offers_its_revert() -> None:
    world = failed(8, BASE.replace(tensor_parallel_size=2), TP1, kind="world_size_exceeds_gpus")
    assert choose_fix([world]).fix == TP1


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


def test_a_chain_of_same_kind_failures_never_steps_a_flag_on_and_on() -> None:
    """util 0.95 failed the same way, then its own next step (0.96) did too: f goes back to
    the first failure's other fix, never to 0.97 from the second."""
    step = lambda u: Fix(title=f"util {u}", set={"gpu_memory_utilization": u})  # noqa: E731
    first = failed(1, BASE, step(0.95), LOWER)
    second = failed(2, BASE.replace(gpu_memory_utilization=0.95), step(0.96))
    third = failed(3, BASE.replace(gpu_memory_utilization=0.96), step(0.97))
    choice = choose_fix([first, second, third])
    assert choice.fix == LOWER and choice.run is first
