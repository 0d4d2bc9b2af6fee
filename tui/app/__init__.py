"""The composition root: where every ``vtc`` entry point is assembled from the rooms.

``cli`` (the ``vtc`` command and the console), ``sweep`` (``vtc sweep``), ``bench``
(``vtc bench``), ``top`` (``vtc top``), ``board`` (``vtc runs``/``export``/``report``),
``setup`` (``vtc setup-cpu-vllm``); ``vtc diagnose``, ``presets`` and ``stop`` live in
``cli``. Dependencies point down from here: no room below imports ``tui.app``.
"""
