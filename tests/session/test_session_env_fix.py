"""An environment variable is a fix too (issue 19): WSL2's UVA failure, cured by the run's
environment, through the real services and the simulator (as ``vtc --demo --sim-host wsl2``).

failure -> diagnosis (``VLLM_USE_V2_MODEL_RUNNER=0``) -> ``f``'s choice -> a served run
whose environment is stored with it, diffed against the failure and written into its
exports; the variable reaches the server's process, never its argv.
"""

from __future__ import annotations

from pathlib import Path

import psutil

from tui.domain.events import ServerState
from tui.domain.export import export_run
from tui.domain.fix_loop import choose_fix
from tui.domain.flags.serve_diff import diff_flags
from tui.domain.results import RunStatus
from tui.modes import ConsoleOptions, build_session
from tui.session import wait_for_state
from tui.store.history import RunStore

RUNNER = "VLLM_USE_V2_MODEL_RUNNER"


async def test_wsl2_uva_failure_is_fixed_by_the_runs_environment(tmp_path: Path) -> None:
    options = ConsoleOptions(
        demo=True, sim_speed=50, sim_host="wsl2", data_dir=tmp_path, poll_interval_s=0.2
    )
    session = build_session(options)
    await session.start()  # the demo autostarts its preset: V2, no UVA under WSL2
    try:
        state = await wait_for_state(session, {ServerState.READY, ServerState.FAILED}, 60)
        assert state is ServerState.FAILED
        failed = session.current
        assert failed is not None and failed.diagnosis is not None
        assert failed.diagnosis.kind == "model_runner_unsupported"
        assert failed.flags.env == ()

        choice = choose_fix(list(session.runs))
        assert choice.fix is not None and choice.fix.env == {RUNNER: "0"}
        assert choice.settings == {"env": ((RUNNER, "0"),)}  # what f puts in the form
        fixed = choice.fix.applied_to(failed.flags)
        await session.restart(fixed)
        state = await wait_for_state(session, {ServerState.READY, ServerState.FAILED}, 60)
        assert state is ServerState.READY
        served = session.current
        assert served is not None and served.flags.environment == {RUNNER: "0"}
        pid = session.pid
        assert pid is not None
        server = psutil.Process(pid)
        assert server.environ().get(RUNNER) == "0"  # the process's environment...
        assert not any(RUNNER in arg for arg in server.cmdline())  # ...never its argv
        assert [(c.name, c.old, c.new) for c in diff_flags(failed.flags, served.flags)] == [
            ("env", "none", f"{RUNNER}=0")
        ]
    finally:
        await session.close()

    store = RunStore(tmp_path / "demo-runs.sqlite")
    try:
        runs = store.list()
    finally:
        store.close()
    assert [r.status for r in runs][-2:] == [RunStatus.FAILED, RunStatus.STOPPED]
    stored = runs[-1]
    assert stored.flags.environment == {RUNNER: "0"}  # the history keeps it
    command = export_run(stored, "command").text
    assert f"{RUNNER}=0 " in command and "vllm serve" in command
