"""The cost model and scheduler: throughput trends measured in simulated time, not wall time."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

from tui.domain.flags.serve import ServeFlags
from tui.sim.catalog import resolve_gpu, resolve_model
from tui.sim.costmodel import CostModel, StepWork
from tui.sim.memory import MemoryPlan, SimHardware, plan_memory, resolve
from tui.sim.scheduler import SchedulerConfig, SimRequest, simulate

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"


def started(gpu: str = "rtx4090-24gb", model: str = LLAMA_8B, **flags: Any) -> MemoryPlan:
    entry = resolve_model(model)
    cfg = resolve(
        ServeFlags(model=model, max_model_len=4096, **flags), entry, SimHardware(resolve_gpu(gpu))
    )
    plan = plan_memory(cfg)
    assert plan.failure is None, plan.failure
    return plan


def workload(n: int, prompt: int = 256, output: int = 64, shared: int = 0) -> list[SimRequest]:
    reqs = []
    for i in range(n):
        ids = list(range(10_000, 10_000 + shared)) + [
            100_000 + i * prompt + k for k in range(prompt - shared)
        ]
        reqs.append(SimRequest(request_id=str(i), prompt_ids=ids, max_tokens=output))
    return reqs


def sched_config(plan: MemoryPlan, **over: object) -> SchedulerConfig:
    assert plan.capacity is not None
    cfg = SchedulerConfig(
        num_gpu_blocks=plan.capacity.num_blocks,
        block_size=plan.cfg.block_size,
        max_num_seqs=plan.cfg.max_num_seqs,
        max_num_batched_tokens=plan.cfg.max_num_batched_tokens,
        max_model_len=plan.max_model_len,
    )
    return replace(cfg, **over)  # type: ignore[arg-type]


def test_decode_throughput_rises_with_batch_size() -> None:
    cost = CostModel.from_plan(started())
    rates = [cost.decode_throughput(b, 512) for b in (1, 2, 4, 8, 16, 32, 64, 128)]
    assert all(b > a for a, b in itertools.pairwise(rates))
    # Weights are read once per step for the whole batch: batch 32 is far above 10x batch 1.
    assert rates[5] > 10 * rates[0]


def test_single_stream_decode_is_bandwidth_bound_and_prefill_compute_bound() -> None:
    plan = started()
    cost = CostModel.from_plan(plan)
    gpu = plan.cfg.hardware.gpu
    step = cost.step_time(StepWork(decode_seqs=1, context_tokens=512, attention_pairs=512))
    weights_time = plan.weights / (gpu.bandwidth_gbs * 1e9)
    assert weights_time < step < 2 * weights_time
    prefill = StepWork(prefill_tokens=2048, context_tokens=2048, attention_pairs=2048 * 2049 // 2)
    flops_time = 2 * plan.cfg.entry.shape.param_count * 2048 / (gpu.fp16_tflops * 1e12)
    assert cost.step_time(prefill) > flops_time > weights_time


def test_fp8_weights_decode_faster_than_bf16() -> None:
    bf16 = CostModel.from_plan(started())
    fp8 = CostModel.from_plan(started(quantization="fp8"))
    assert fp8.decode_throughput(8, 512) > 1.5 * bf16.decode_throughput(8, 512)


def test_cpu_offload_is_slower() -> None:
    base = CostModel.from_plan(started(quantization="fp8"))
    offload = CostModel.from_plan(started(quantization="fp8", cpu_offload_gb=2))
    # 2 GiB over a ~25 GB/s link each step: tens of milliseconds per token.
    assert offload.decode_throughput(1, 512) < 0.5 * base.decode_throughput(1, 512)


def test_eager_mode_adds_per_step_overhead() -> None:
    graphs = CostModel.from_plan(started(quantization="fp8"))
    eager = CostModel.from_plan(started(quantization="fp8", enforce_eager=True))
    assert eager.decode_throughput(1, 128) < graphs.decode_throughput(1, 128)


def test_more_sequences_per_batch_finish_a_workload_sooner() -> None:
    plan = started(quantization="fp8")
    cost = CostModel.from_plan(plan)
    durations = []
    for seqs in (1, 4, 16, 32):
        result = simulate(sched_config(plan, max_num_seqs=seqs), cost, workload(32, output=32))
        assert all(len(r.output_ids) == 32 for r in result.requests)
        durations.append(result.duration)
    assert all(b < a for a, b in itertools.pairwise(durations))


def test_shared_prefix_hits_the_prefix_cache() -> None:
    plan = started(quantization="fp8")
    cost = CostModel.from_plan(plan)
    reqs = workload(8, prompt=200, output=4, shared=100)
    for i, r in enumerate(reqs):
        r.arrival = i * 1.0  # one after another, so earlier prefixes are cached
    result = simulate(sched_config(plan), cost, reqs)
    assert result.prefix_queries == 8 * 200
    # The first request misses; each later one hits the 6 full blocks (96 tokens) of the prefix.
    assert result.prefix_hits == 7 * 96
    no_cache = simulate(
        sched_config(plan, enable_prefix_caching=False), cost, workload(8, 200, 4, 100)
    )
    assert no_cache.prefix_hits == 0


def test_kv_pressure_preempts_and_every_request_still_completes() -> None:
    plan = started(quantization="fp8")
    cost = CostModel.from_plan(plan)
    # 35 usable blocks: two 256-token prompts fit (16 blocks each), but not their growth to
    # 320 tokens (20 blocks each), so one is preempted and recomputed later.
    tight = sched_config(plan, num_gpu_blocks=36, max_num_seqs=16)
    result = simulate(tight, cost, workload(16, prompt=256, output=64))
    assert result.num_preemptions > 0
    assert all(len(r.output_ids) == 64 and r.finish_reason == "length" for r in result.requests)


def test_without_chunked_prefill_a_step_holds_whole_prompts_only() -> None:
    plan = started(quantization="fp8")
    cost = CostModel.from_plan(plan)
    cfg = sched_config(plan, max_num_batched_tokens=512, enable_chunked_prefill=False)
    result = simulate(cfg, cost, workload(6, prompt=300, output=2))
    assert all(len(r.output_ids) == 2 for r in result.requests)
    chunked = simulate(
        replace(cfg, enable_chunked_prefill=True), cost, workload(6, prompt=300, output=2)
    )
    assert chunked.steps < result.steps
