"""The load generator, in four named parts and their helpers.

- schedule (:mod:`~tui.load.schedule`, :mod:`~tui.load.arrivals`): warm-ups, arrivals,
  duration or closed loop, the concurrency cap;
- stream (:mod:`~tui.load.client`, :mod:`~tui.load.wire`): the HTTP hot path, which stamps
  each read before anything else;
- account (:mod:`~tui.load.account`, :mod:`~tui.load.sse`, :mod:`~tui.load.live`): what
  each response's bytes mean, the run's records, live numbers, the client's own health;
- report (:mod:`~tui.load.report`, :mod:`~tui.load.stats`): bench serve's statistics into
  a typed ``BenchResult``;

orchestrated by :class:`~tui.load.runner.LoadRunner`. Workloads: random
(:mod:`~tui.load.prompts` with the model's own tokenizer, :mod:`~tui.load.tokenizer`),
shared prefix, JSONL and ShareGPT (:mod:`~tui.load.datasets`), bounded before they run
(:mod:`~tui.load.budget`). ``vtc bench`` is :mod:`~tui.app.bench` (its arguments
:mod:`~tui.load.bench_args`, its result file :mod:`~tui.load.result_file`).
"""
