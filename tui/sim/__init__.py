"""The simulator: a drop-in for ``vllm serve`` backed by a model of a GPU (``vtc-sim``).

See ``README.md`` beside this file for what it imitates. Modules:
:mod:`~tui.sim.cli` and :mod:`~tui.sim.argv` (the command line, over vLLM's own flag table
in :mod:`~tui.sim.vllm_flags`), :mod:`~tui.sim.catalog` (GPUs, models) and
:mod:`~tui.sim.model_files` (model folders, the HF cache), :mod:`~tui.sim.validation`
(config-time errors), :mod:`~tui.sim.memory` (vLLM's start-up memory budget),
:mod:`~tui.sim.startup` (the checks and EngineCore's start-up log), :mod:`~tui.sim.server`
(one run), :mod:`~tui.sim.build` (assembling a started server),
:mod:`~tui.sim.costmodel` (step time) and :mod:`~tui.sim.lora`,
:mod:`~tui.sim.scheduler` (continuous batching over paged KV blocks),
:mod:`~tui.sim.engine` (the asyncio step loop), :mod:`~tui.sim.metrics` and
:mod:`~tui.sim.metric_tables` (/metrics), :mod:`~tui.sim.http` and
:mod:`~tui.sim.generation` (the OpenAI-compatible API), :mod:`~tui.sim.fixed` (injected
delays), :mod:`~tui.sim.tokenizer` and :mod:`~tui.sim.hf_tokenizer` (counting tokens),
:mod:`~tui.sim.logs` (vLLM's log and traceback shapes), :mod:`~tui.sim.whatif` (the same
engine on a virtual clock).
"""
