"""The console's resume: only the sweep asked for, only on the machine its trials were
measured on, or one line saying why not (issue 17: ``u`` resumed another process's sweep on
another simulated GPU)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tui.domain.errors import VtcError
from tui.domain.sweep import SweepSpec
from tui.domain.sweep.outcome import TrialOutcome, TrialState
from tui.tune.journal import Journal, journal_path, read_summary
from tui.tune.service import SweepService

SPEC = SweepSpec.model_validate(
    {"name": "mine", "base": {"model": "m"}, "parameters": {"max_num_seqs": [1, 2]}, "workload": {}}
)
HERE = "demo · simulated RTX 3080 · 50x time"


def journal(tmp_path: Path, machine: str | None, *, done: bool = False) -> Path:
    path = journal_path(tmp_path, SPEC.sweep_id())
    written = Journal(path, SPEC, machine=machine)
    written.record(TrialOutcome(index=1, key="k1", state=TrialState.FAILED_START))
    if done:
        written.close_done()
    return path


def service(tmp_path: Path) -> tuple[SweepService, list[SweepSpec]]:
    started: list[SweepSpec] = []
    svc = SweepService(
        data_dir=tmp_path, emit=lambda _: None, client=httpx.AsyncClient, machine=HERE
    )
    svc.start = lambda spec, baseline_run_id=None: started.append(spec)  # type: ignore[method-assign]
    return svc, started


async def test_a_sweep_measured_elsewhere_is_not_resumed_and_says_where(tmp_path: Path) -> None:
    path = journal(tmp_path, "demo · simulated H100 80GB · 50x time")
    summary = read_summary(path)
    assert summary is not None and summary.machine == "demo · simulated H100 80GB · 50x time"
    svc, started = service(tmp_path)
    with pytest.raises(VtcError, match="measured on demo · simulated H100 80GB") as caught:
        await svc.resume(SPEC.sweep_id())
    assert "\n" not in caught.value.one_line() and started == []


async def test_the_sweep_asked_for_resumes_on_its_own_machine(tmp_path: Path) -> None:
    journal(tmp_path, HERE)
    svc, started = service(tmp_path)
    assert (await svc.resume(SPEC.sweep_id())).sweep_id() == SPEC.sweep_id()
    assert [s.sweep_id() for s in started] == [SPEC.sweep_id()]


async def test_no_journal_or_a_finished_one_says_why_not(tmp_path: Path) -> None:
    svc, started = service(tmp_path)
    with pytest.raises(VtcError, match="no journal"):
        await svc.resume("nosuch-0000")
    journal(tmp_path, HERE, done=True)
    with pytest.raises(VtcError, match="finished: nothing to resume"):
        await svc.resume(SPEC.sweep_id())
    assert started == []
