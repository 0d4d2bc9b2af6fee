"""The demo mode's choices: an honest header, the simulator's own GPU (freed when it exits),
reproduction facts and the console session of each run."""

from __future__ import annotations

from pathlib import Path

from fakes.servers import FakeLauncher
from fakes.waiting import until

from tui.domain.telemetry import SourceStatus
from tui.modes import ConsoleOptions
from tui.modes.common import assemble
from tui.modes.demo import DemoMode, demo_label
from tui.session.slot import ServerSlot
from tui.sim.versions import DEFAULT_SIM_VLLM_VERSION
from tui.store.history import RunStore


def test_the_demo_header_names_the_simulated_gpu_and_its_time_scale(tmp_path: Path) -> None:
    info, services = DemoMode().parts(ConsoleOptions(demo=True, sim_speed=4, data_dir=tmp_path))
    services.store.close()
    assert info.label == "demo · simulated RTX 3080 · 4x time"
    assert demo_label("h100-80gb", 1) == "demo · simulated H100 80GB HBM3 · real time"
    assert demo_label("no-such-gpu", 2) == "demo · simulated no-such-gpu · 2x time"
    policy = services.gpu_policy
    assert services.gpu is None and policy.simulated  # its page's gauges, freed on exit
    assert policy.absent is not None and policy.absent.status is SourceStatus.UNAVAILABLE


async def test_each_launch_records_how_to_reproduce_it_and_its_console_session(
    tmp_path: Path,
) -> None:
    options = ConsoleOptions(demo=True, data_dir=tmp_path, poll_interval_s=0.05)
    info, services = DemoMode().parts(options)
    launcher = FakeLauncher()
    services.slot = ServerSlot(launcher=launcher, keeper=services.slot._keeper)
    session = assemble(info, services, poll_interval_s=0.05)
    await session.start()  # the demo autostarts its preset

    def captured() -> bool:
        run = session.current
        return run is not None and run.repro is not None and run.repro.vllm_version is not None

    await until(captured, "the reproduction facts")
    run = session.current
    assert run is not None and run.repro is not None and run.session is not None
    assert run.repro.argv == ["vllm", "serve", "m"]  # exactly what was executed
    assert run.repro.vllm_version == DEFAULT_SIM_VLLM_VERSION  # the vLLM the simulator speaks
    assert run.repro.gpu_name is not None and run.repro.gpu_name.endswith("(simulated)")
    assert run.repro.host
    await session.close()
    (stored,) = RunStore(tmp_path / "demo-runs.sqlite").list()
    assert stored.repro == run.repro and stored.session == run.session


async def test_a_relaunch_starts_from_the_form_the_last_console_left(tmp_path: Path) -> None:
    """Issue 39: relaunching the console reset the form. The first console keeps its form
    through its tools (the one writer); the next starts there, unless told otherwise."""
    from tui.domain.saved_form import SavedForm
    from tui.domain.workload import LoadSpec

    options = ConsoleOptions(demo=True, data_dir=tmp_path, autostart=False)
    info, services = DemoMode().parts(options)
    session = assemble(info, services, poll_interval_s=0.05)
    edited = SavedForm(
        info.initial_flags.replace(max_num_seqs=48), LoadSpec(num_prompts=9), info.initial_preset
    )
    await session.tools.save_form(edited)
    await session.close()

    again, services = DemoMode().parts(options)
    services.store.close()
    assert again.initial_flags.max_num_seqs == 48 and again.initial_load.num_prompts == 9
    assert again.initial_preset == info.initial_preset
    assert not any("form" in n for n in again.notices)

    named, services = DemoMode().parts(
        ConsoleOptions(demo=True, data_dir=tmp_path, preset=info.initial_preset)
    )
    services.store.close()
    assert named.initial_flags.max_num_seqs != 48  # the command line names its own start

    (tmp_path / "demo-runs.form.json").write_text("{damaged")
    damaged, services = DemoMode().parts(options)
    services.store.close()
    assert damaged.initial_flags == info.initial_flags
    (line,) = [n for n in damaged.notices if "form" in n]
    assert "was not used" in line and "\n" not in line
