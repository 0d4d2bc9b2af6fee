"""``vtc-sim --help`` for a terminal, and one default GPU for ``vtc-sim`` and ``vtc --demo``."""

from __future__ import annotations

import io
import re
from pathlib import Path

from tui.modes.demo import DemoMode
from tui.modes.options import ConsoleOptions
from tui.sim.argv import parse_command
from tui.sim.catalog import DEFAULT_GPU, GPUS
from tui.sim.cli import run


def _out(*argv: str) -> str:
    out = io.StringIO()
    assert run(list(argv), out=out, err=io.StringIO()) == 0
    return out.getvalue()


def test_help_is_plain_text_not_restructured_text() -> None:
    for argv in (("--help",), (), ("serve", "--help")):
        text = _out(*argv)
        assert text.startswith("usage: vtc-sim serve MODEL")
        assert "``" not in text and not re.search(r":(mod|class|data|func):`", text), text
        assert "vtc-sim gpus" in text and f"default {DEFAULT_GPU}" in text


def test_vtc_sim_alone_simulates_the_gpu_the_demo_does(tmp_path: Path) -> None:
    info, services = DemoMode().parts(ConsoleOptions(demo=True, data_dir=tmp_path))
    services.store.close()
    sim = parse_command(["meta-llama/Llama-3.1-8B-Instruct"]).sim.gpu
    assert sim.key == DEFAULT_GPU
    short = sim.name.removeprefix("NVIDIA ").removeprefix("GeForce ")
    assert f"simulated {short}" in info.label, (info.label, sim.name)


def test_gpus_lists_the_catalogue_and_marks_the_default() -> None:
    text = _out("gpus")
    for key in GPUS:
        assert key in text
    (default,) = [line for line in text.splitlines() if line.startswith("*")]
    assert DEFAULT_GPU in default
