"""Sweeps: auto_tune.sh's search, a grid, and a model-based search, over real servers.

- :mod:`.space`: the parameter space, ``vllm bench sweep serve``'s parameter files;
- :mod:`.spec_file`: reading ``presets/sweeps/*.toml`` and auto_tune.sh's environment;
- :mod:`.lanes`: what a trial needs of a server (start, benchmark, reset the prefix cache),
  over a console ``Session`` (:mod:`.session_lane`) or the simulator's virtual clock
  (:mod:`.whatif_lane`, for benchmarks and fast tests);
- :mod:`.context`: the trial loop shared by the strategies (lanes, the journal that makes a
  sweep resumable, the budget, stopping, progress);
- :mod:`.strategies`: ``auto_tune``, ``grid``, ``search``;
- :mod:`.service`: the sweep as the console drives it; ``vtc sweep`` is ``tui/app/sweep.py``.
"""
