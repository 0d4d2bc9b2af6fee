"""The load generator: workloads (random, shared prefix, JSONL, ShareGPT), the model's own
tokenizer, arrivals, the streaming client, the runner with live progress, bench serve's
statistics, and ``vtc bench`` (:mod:`tui.load.bench_cli`)."""
