"""CPU per hot key, in-process (issue 22): the console's own cost, whatever the machine's load.

    python benchmarks/console_key_costs.py [--runs 30] [--size 80x24] [--rounds 6] [--tree DIR]

The console (``create_app``) over the tests' fake session with ``--runs`` seeded runs
(``console_latency.seeded_run``), headless under Textual's Pilot, ``--tree``'s code (default
this one: another checkout gives the "before"). Each key of ``console_latency``'s set is
pressed ``--rounds`` times after one warm-up round; per key it prints the process CPU per
press (``time.process_time``, median and max). Pilot's own wait is in it (~40-50 ms here, see
the Left/Right rows): compare keys with each other and before with after, not with the tmux
figures. CPU time moves far less than wall time on a machine others are loading.

Needs the test extras (the fake session lives in ``tests/ui/ui_fakes.py``). No vLLM.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from benchmarks._procs import load_average, table  # noqa: E402

KEYS: tuple[tuple[str, str], ...] = (
    ("left", "← (cards)"),
    ("right", "→ (cards)"),
    ("question_mark", "? (help)"),
    ("escape", "Esc (close help)"),
    ("enter", "Enter (detail)"),
    ("escape", "Esc (close detail)"),
    ("t", "t (to table)"),
    ("up", "↑ (table)"),
    ("down", "↓ (table)"),
    ("t", "t (to cards)"),
)


async def measure(runs: int, size: tuple[int, int], rounds: int) -> list[list[str]]:
    """Press every key ``rounds`` times (after a warm-up round); the table."""
    from ui_fakes import board_session  # imported once --tree leads sys.path

    from benchmarks.console_latency import seeded_run
    from tui.ui.app import create_app

    records = [
        seeded_run(i).model_copy(update={"id": i + 1, "label": f"#{i + 1}"}) for i in range(runs)
    ]
    app = create_app(board_session(records), clock=None, autostart=False)
    cpu: dict[str, list[float]] = {name: [] for _, name in KEYS}
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        for round_no in range(1 + rounds):
            for key, name in KEYS:
                start = time.process_time()
                await pilot.press(key)
                await pilot.pause()
                if round_no > 0:
                    cpu[name].append(time.process_time() - start)
    rows = [["key", "cpu ms (median)", "cpu ms (max)"]]
    for _, name in KEYS:
        ms = [v * 1000 for v in cpu[name]]
        rows.append([name, f"{statistics.median(ms):.0f}", f"{max(ms):.0f}"])
    return rows


def main(argv: list[str] | None = None) -> int:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="runs on the board")
    parser.add_argument("--size", default="80x24", help="terminal size, WxH")
    parser.add_argument("--rounds", type=int, default=6, help="presses per key")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the source tree to measure")
    args = parser.parse_args(argv)
    # The measured tree's code and the tests' fakes first (its tui, not this one's).
    sys.path[:0] = [str(args.tree), str(args.tree / "tests"), str(args.tree / "tests" / "ui")]
    for name in [m for m in sys.modules if m == "tui" or m.startswith("tui.")]:
        del sys.modules[name]
    width, height = (int(x) for x in args.size.split("x"))
    print(
        f"console key costs: {args.runs} runs, {args.size}, code of {args.tree}; {load_average()}"
    )
    table(asyncio.run(measure(args.runs, (width, height), args.rounds)))
    print(load_average())
    return 0


if __name__ == "__main__":
    sys.exit(main())
