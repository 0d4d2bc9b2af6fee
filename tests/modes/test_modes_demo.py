"""The demo's telemetry: an honest header, and the simulator's own GPU, freed when it exits."""

from __future__ import annotations

from pathlib import Path

from tui.domain.telemetry import SourceStatus
from tui.modes import ConsoleOptions
from tui.modes.demo import DemoMode, demo_label


def test_the_demo_header_names_the_simulated_gpu_and_its_time_scale(tmp_path: Path) -> None:
    info, services = DemoMode().parts(ConsoleOptions(demo=True, sim_speed=4, data_dir=tmp_path))
    services.store.close()
    assert info.label == "demo · simulated RTX 3080 · 4x time"
    assert demo_label("h100-80gb", 1) == "demo · simulated H100 80GB HBM3 · real time"
    assert demo_label("no-such-gpu", 2) == "demo · simulated no-such-gpu · 2x time"
    policy = services.gpu_policy
    assert services.gpu is None and policy.simulated  # its page's gauges, freed on exit
    assert policy.absent is not None and policy.absent.status is SourceStatus.UNAVAILABLE
