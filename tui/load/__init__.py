"""The load generator: random workload, arrivals, streaming client, runner, statistics."""
