"""``ConsoleOptions`` come from the parser: one declaration per option, nothing copied by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tui.app.cli import _parser
from tui.modes import ConsoleOptions

NOT_ON_THE_COMMAND_LINE = {"serve_args", "data_dir", "poll_interval_s"}  # set by the root


def test_every_console_option_is_a_dest_of_the_vtc_parser() -> None:
    dests = {a.dest for a in _parser()._actions}
    names = {f.name for f in dataclasses.fields(ConsoleOptions)} - NOT_ON_THE_COMMAND_LINE
    assert names <= dests, f"options the parser does not fill: {names - dests}"


def test_the_parsed_command_line_becomes_the_options() -> None:
    argv = [
        "--demo",
        "--no-autostart",
        "--sim-speed",
        "2",
        "--sim-gpu",
        "h100-80gb",
        "--preset",
        "p",
        "--config",
        "c.yaml",
        "--startup-timeout",
        "30",
    ]
    options = ConsoleOptions.from_args(_parser().parse_args(argv), ["serve", "m"])
    assert options == ConsoleOptions(
        demo=True,
        autostart=False,
        sim_speed=2.0,
        sim_gpu="h100-80gb",
        preset="p",
        config=Path("c.yaml"),
        startup_timeout=30.0,
        serve_args=["serve", "m"],
    )
    plain = ConsoleOptions.from_args(_parser().parse_args([]))
    assert plain == ConsoleOptions()  # the parser's defaults are the options' defaults


def test_the_sweep_command_line_fills_the_options_it_shares() -> None:
    args = _parser().parse_args(["sweep", "s.toml", "--demo", "--sim-speed", "8", "--vllm", "v"])
    options = ConsoleOptions.from_args(args, autostart=False)
    assert (options.demo, options.sim_speed, options.vllm, options.autostart) == (
        True,
        8.0,
        "v",
        False,
    )
    assert options.preset is None and options.serve_args == []
