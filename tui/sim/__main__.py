"""``python -m tui.sim`` runs the simulator CLI (same as ``vtc-sim``)."""

from tui.sim.cli import main

if __name__ == "__main__":
    main()
