"""``vtc capacity URL --confirm`` on the real CPU build of vLLM 0.32: at most three real loads,
each a run on the board, stated as measured.

One start of the tiny Llama, its own data dir, short loads (a dozen requests each). The
profile is a hand-made one named for the served model (its figures are not the server's:
the twin's answer is then corrected by the real loads, which is the path that spends the
third load). Run it under the shared lock: ``flock /tmp/vtc-realvllm.lock pytest -n 0 -q -m
realvllm tests/integration/test_realvllm_capacity.py``.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from fakes.profiles import cpu_profile

from tui.app.capacity import capacity_answer
from tui.app.cli import _parser
from tui.domain.capacity import MOST_REAL_LOADS
from tui.domain.flags.serve import ServeFlags
from tui.modes.calibrate import launched
from tui.server.provision import ProvisionedVllm
from tui.store.history import RunStore
from tui.store.profiles import save_profile

# timed: a rate search against a TTFT SLO, alone (tests/suite_tiers.py)
pytestmark = [pytest.mark.realvllm, pytest.mark.timed]


async def test_confirm_spends_at_most_three_real_loads_each_on_the_board(
    real_vllm: ProvisionedVllm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("VTC_DATA_DIR", str(data))
    model = str(real_vllm.model)
    made = cpu_profile(tmp_path / "twin-model", name="tiny-real")
    profile = made.model_copy(
        update={
            "identity": made.identity.model_copy(update={"model": model}),
            "flags": made.flags.replace(model=model),
        }
    )
    save_profile(profile, data)
    flags = ServeFlags(
        model=model, enforce_eager=True, kv_cache_memory_bytes=64 * 2**20, max_model_len=2048
    )
    argv = [
        "capacity",
        "--profile",
        "tiny-real",
        "--slo",
        "p99_ttft_ms=300",
        "--input-len",
        "32",
        "--output-len",
        "16",
        "--num-prompts",
        "12",
        "--confirm",
    ]
    out = io.StringIO()
    async with launched(str(real_vllm.vllm), flags, tmp_path, startup_timeout_s=600) as target:
        args = _parser().parse_args([*argv[:1], target.base_url, *argv[1:]])
        answer = await capacity_answer(args, [], out)
    loads = answer.real_loads
    assert 2 <= len(loads) <= MOST_REAL_LOADS, answer.verdict()
    assert loads[0].rate == pytest.approx(answer.max_rate, rel=1e-3)
    assert loads[1].rate > loads[0].rate
    said = out.getvalue()
    assert said.count("measured at ") == len(loads)
    assert answer.verdict().startswith(("confirmed", "corrected"))
    store = RunStore(data / "runs.sqlite")
    try:
        runs = {r.id: r for r in store.list()}
    finally:
        store.close()
    for load in loads:  # each real load is a run on the board, with the load it ran
        assert load.run_id in runs, f"load at {load.rate} not on the board"
        run = runs[load.run_id]
        assert run.bench is not None and run.bench.completed == 12
        assert run.workload is not None and run.workload.request_rate == load.rate
        assert run.prediction is not None  # the twin predicted it, labelled, before it ran
