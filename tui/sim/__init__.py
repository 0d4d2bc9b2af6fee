"""The simulator: a drop-in for ``vllm serve`` backed by a model of a GPU (``vtc-sim``).

Modules: :mod:`~tui.sim.catalog` (GPUs, models), :mod:`~tui.sim.memory` (vLLM's start-up
memory budget), :mod:`~tui.sim.validation` (config-time errors), :mod:`~tui.sim.costmodel`
(step time), :mod:`~tui.sim.scheduler` (continuous batching over paged KV blocks),
:mod:`~tui.sim.engine` (the asyncio step loop), :mod:`~tui.sim.metrics` (/metrics),
:mod:`~tui.sim.http` (the OpenAI-compatible API), :mod:`~tui.sim.logs` (vLLM's log and
traceback shapes), :mod:`~tui.sim.server` (one run), :mod:`~tui.sim.argv` and
:mod:`~tui.sim.cli` (the command line), :mod:`~tui.sim.tokenizer` (the approximate tokenizer).
"""
