"""The calibration's design, ETA and what it reads of a startup log."""

from __future__ import annotations

import math

import pytest

from tui.domain.calibration import Progress, design, log_facts, memory_side
from tui.domain.workload import LoadSpec
from tui.twin.budget import LoadCosts, plan

GIB = 2**30


def test_the_design_probes_decode_prefill_mixed_and_prefix_within_the_context() -> None:
    loads = design(2048, max_num_seqs=48)
    names = [d.name for d in loads]
    # Three small probes first: decode alone at 1 and 8, short prompts alone; a budget cut
    # after them still leaves decode and prefill steps apart, and every later load is
    # sized from what they cost.
    assert names[:3] == ["decode-c1", "prefill-short-c1", "decode-c8"]
    assert all(d.probe for d in loads[:3]) and not any(d.probe for d in loads[3:])
    assert {"mixed-c8", "decode-deep-c8", "prefill-c1", "prefill-c4", "prefix-c8"} <= set(names)
    assert names[8] == "decode-top"  # the costliest last
    for d in loads:
        assert d.load.input_len + d.load.prefix_len + d.load.output_len <= 2048
        assert d.load.ignore_eos
        assert d.load.num_prompts >= d.least >= (d.load.max_concurrency or 1)
    # Decode up to the server's max_num_seqs, at short and deep contexts.
    by_name = {d.name: d.load for d in loads}
    assert [by_name[n].max_concurrency for n in ("decode-c1", "decode-c8", "decode-top")] == [
        1,
        8,
        48,
    ]
    assert by_name["decode-deep-c8"].input_len > 10 * by_name["decode-c8"].input_len
    # Prefill alone (one output token) at two lengths: the attention pairs apart from tokens.
    short, long = by_name["prefill-short-c1"], by_name["prefill-c1"]
    assert short.output_len == long.output_len == 1 and long.input_len >= 8 * short.input_len
    assert design(2048, scale=2.0)[3].load.num_prompts == 2 * loads[3].load.num_prompts
    assert max(d.load.max_concurrency or 0 for d in design(4096, max_num_seqs=1024)) == 128
    # Two passes: the same families again, other prompts.
    twice = design(2048, passes=2)
    assert [d.family for d in twice[9:]] == [*names[:8], "decode-top"]
    assert twice[9].name == "decode-c1#2" and twice[9].load.seed != twice[0].load.seed


def _slow_cpu(load: LoadSpec) -> float:
    """A compute-bound CPU server's seconds for a load (like the small reference's: a
    prompt token ~11 ms with attention pairs on top, a step ~12 ms, a streamed token
    ~11 ms): the truth the plan estimates."""
    n = load.num_prompts + load.num_warmups
    conc = min(load.max_concurrency or n, n)
    steps = (math.ceil(load.num_prompts / conc) + load.num_warmups) * load.output_len
    prompt = n * load.input_len + load.prefix_len
    pairs = n * load.input_len**2 / 2
    return 0.011 * prompt + 1.5e-6 * pairs + 0.012 * steps + 0.011 * n * load.output_len


def _run_within(loads: list, budget_s: float, truth) -> tuple[dict, list]:  # type: ignore[no-untyped-def, type-arg]
    """The calibration's loop on a clock: plan, run the next load, again, until the budget."""
    ran: dict[str, tuple[LoadSpec, float]] = {}
    etas = []
    clock_s = 0.0
    while True:
        sized = plan(loads, ran, budget_s)
        todo = [d for d in sized.loads if d.name not in ran]
        if not todo:
            return ran, etas
        etas.append((clock_s, sized.eta(set(ran))))
        spec = todo[0].load.model_copy(update={"num_warmups": 2 if not ran else 0})
        clock_s += truth(spec)
        if clock_s > budget_s:
            return ran, etas
        ran[todo[0].name] = (spec, truth(spec))


def test_a_slow_server_completes_every_family_and_both_passes_within_the_budget() -> None:
    loads = design(4096, passes=2)
    assert sum(_slow_cpu(d.load) for d in loads) > 4 * 300  # as designed: far too long
    ran, etas = _run_within(loads, 300.0, _slow_cpu)
    assert [n for n in ran] == [d.name for d in loads]  # every load, in order
    total = sum(s for _, s in ran.values())
    assert total <= 300.0
    sized = {n: spec for n, (spec, _) in ran.items()}
    by_family: dict[str, list[LoadSpec]] = {}
    for d in loads:
        run = sized[d.name]
        by_family.setdefault(d.family, []).append(run.model_copy(update={"num_warmups": 0}))
        # Never below what the fit needs: a full batch (the top one lowered, on a slow server).
        assert run.num_prompts >= (run.max_concurrency if d.top else d.least)
    for family, runs in by_family.items():  # both passes alike: the spread means something
        a, b = runs
        assert a.model_copy(update={"seed": 0}) == b.model_copy(update={"seed": 0}), family
    # Requests went first, then the long prompts, their ratios kept: the terms stay apart.
    short, long = sized["prefill-short-c1"], sized["prefill-c1"]
    assert long.input_len >= 3 * short.input_len
    assert sized["decode-deep-c8"].input_len >= 2 * sized["mixed-c8"].input_len
    assert sized["decode-deep-c8"].input_len > 4 * sized["decode-c8"].input_len
    assert all(sized[n].num_prompts == sized[n].max_concurrency for n in ("mixed-c8", "prefix-c8"))
    # The ETA: none before the probes have run, then within a fifth of what was left.
    assert [e for _, e in etas[:3]] == [None, None, None]
    for clock_s, left in etas[3:]:
        assert left is not None and abs(left - (total - clock_s)) <= 0.2 * (total - clock_s) + 2


def test_a_fast_server_runs_the_design_as_designed() -> None:
    loads = design(4096, passes=2, max_num_seqs=256)

    def fast(load: LoadSpec) -> float:
        return _slow_cpu(load) / 200.0

    ran, _ = _run_within(loads, 300.0, fast)
    assert len(ran) == len(loads)
    for d in loads:
        assert ran[d.name][0].model_copy(update={"num_warmups": 0}) == d.load


def test_the_costs_are_per_prompt_token_step_and_output_token() -> None:
    truth = LoadCosts(0.01, 0.02, 0.005)
    runs = [(d.load, truth.seconds(d.load)) for d in design(4096)[:4]]
    fitted = LoadCosts.fit(runs)
    assert fitted is not None and LoadCosts.fit([]) is None
    for d in design(4096):
        assert fitted.seconds(d.load) == pytest.approx(truth.seconds(d.load), rel=1e-3)
    p = Progress(3, 8, "decode-c16", 62.0, 40.0, 300.0)
    assert p.line(10) == "[####......] 3/8 decode-c16 1:02 elapsed, ~0:40 left (budget 5:00)"


def test_a_cpu_log_and_its_labels_give_the_memory_side() -> None:
    text = (
        "(Worker pid=1) INFO [cpu_worker.py:260] Explicitly set (0.06/8.34) GiB for KV cache "
        "on node 0.\n(EngineCore pid=2) INFO [kv_cache_utils.py:2327] CPU KV cache size: "
        "131,072 tokens, Maximum concurrency for 4,096 tokens per request: 32.00x\n"
    )
    facts = log_facts(text)
    assert (facts.device_kind, facts.kv_tokens) == ("cpu", 131072)
    labels = {
        "block_size": "128",
        "num_gpu_blocks": "1024",
        "kv_cache_memory_bytes": "67108864",
        "gpu_memory_utilization": "0.92",
        "kv_cache_size_tokens": "131072",
    }
    mem = memory_side(
        labels, facts, max_model_len=4096, max_num_seqs=128, max_num_batched_tokens=2048
    )
    assert mem is not None
    assert (mem.kv_tokens, mem.block_size, mem.num_blocks, mem.kv_bytes) == (
        131072,
        128,
        1024,
        64 * 2**20,
    )
    assert mem.non_kv_bytes is None  # a CPU server: no GPU budget to take it from
    assert (
        memory_side({}, log_facts(""), max_model_len=1, max_num_seqs=1, max_num_batched_tokens=1)
        is None
    )


def test_a_gpu_log_gives_every_reservation() -> None:
    text = (
        "Free memory on device cuda:0 (79.19/79.19 GiB) on startup. Desired GPU memory "
        "utilization is (0.9, 71.27 GiB). Actual usage is 14.99 GiB for weight, 1.23 GiB for "
        "peak activation, 0.25 GiB for non-torch memory, and 0.50 GiB for CUDAGraph memory.\n"
        "Available KV cache memory: 54.80 GiB\nGPU KV cache size: 448,928 tokens, Maximum\n"
    )
    facts = log_facts(text)
    assert facts.device_kind == "gpu" and facts.kv_tokens == 448928
    assert facts.available_kv_bytes == int(54.80 * GIB)
    assert facts.activation_bytes == int(1.23 * GIB) and facts.graph_bytes == int(0.5 * GIB)
    assert facts.total_bytes == int(79.19 * GIB)
    labels = {"block_size": "16", "gpu_memory_utilization": "0.9"}
    mem = memory_side(
        labels, facts, max_model_len=8192, max_num_seqs=1024, max_num_batched_tokens=8192
    )
    assert mem is not None and mem.non_kv_bytes is not None and mem.non_kv_bytes > 0
