"""The twin of a real vLLM server: its fit, its honest error, its predictions, its upkeep.

One room (``tests/test_architecture.py``), above the simulator and below the services:

- :mod:`tui.twin.numerics`: scipy's non-negative and Huber least squares, a polish;
- :mod:`tui.twin.fit`: a profile's step and request costs fitted on the twin's own
  batching of the measured loads (the client's means and the server's own ``/metrics``
  phase times as rows), the step-count check, :class:`~tui.twin.fit.FitRecipe` (every
  choice a fit makes); :func:`~tui.twin.fit.measure` reads a twin run;
- :mod:`tui.twin.validation`: each load family scored by the same recipe without it (the
  validation error, per metric, a prediction states), a refit that scores itself, the
  real server's repeat spread;
- :mod:`tui.twin.predict`: one :class:`~tui.domain.prediction.Prediction`, its label and
  each metric's interval (:meth:`~tui.domain.prediction.Prediction.interval`);
- :mod:`tui.twin.calibrate`: ``vtc calibrate``'s procedure on a real server;
- :mod:`tui.twin.service`: the console's twin (cached predictions, calibration in place);
- :mod:`tui.twin.fidelity`: the held-out check against a real server.

What stays outside, and why: the profile and the prediction are records (``tui.domain``:
run records and files carry them, the domain is pure); a step's features and the virtual
clock (``tui.sim.twin``, ``tui.sim.twin_load``) are what ``vtc-sim serve --sim-profile``
runs too, and the simulator sits below this room (both send at the load generator's own
times, ``tui.load.arrivals``); the sweep's twin lanes (``tui.tune.twin``,
``tui.tune.twin_profile``) are lanes, the sweep's own abstraction; profile files are the
store's (``tui.store.profiles``).
"""
