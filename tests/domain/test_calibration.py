"""The calibration's design, ETA and what it reads of a startup log."""

from __future__ import annotations

from tui.domain.calibration import Progress, design, eta, log_facts, memory_side

GIB = 2**30


def test_the_design_probes_decode_prefill_mixed_and_prefix_within_the_context() -> None:
    loads = design(2048, max_num_seqs=48)
    names = [d.name for d in loads]
    # A budget cut after three loads still leaves decode, prefill and mixed steps to fit.
    assert names[:3] == ["decode-c8", "prefill-c1", "mixed-c8"]
    assert {"decode-c1", "decode-deep-c8", "prefill-short-c1", "prefill-c4", "prefix-c8"} <= set(
        names
    )
    assert names[8] == "decode-full-c48"  # the costliest last
    for d in loads:
        assert d.load.input_len + d.load.prefix_len + d.load.output_len <= 2048
        assert d.load.ignore_eos
    # Decode up to the server's max_num_seqs, at short and deep contexts.
    by_name = {d.name: d.load for d in loads}
    assert [by_name[n].max_concurrency for n in ("decode-c1", "decode-c8", "decode-full-c48")] == [
        1,
        8,
        48,
    ]
    assert by_name["decode-deep-c8"].input_len > 10 * by_name["decode-c8"].input_len
    # Prefill alone (one output token) at two lengths: the attention pairs apart from tokens.
    short, long = (
        next(d.load for d in loads if d.name == n) for n in ("prefill-short-c1", "prefill-c1")
    )
    assert short.output_len == long.output_len == 1 and long.input_len >= 4 * short.input_len
    assert design(2048, scale=2.0)[1].load.num_prompts == 2 * loads[1].load.num_prompts
    assert max(d.load.max_concurrency or 0 for d in design(4096, max_num_seqs=1024)) == 128


def test_the_eta_is_the_time_per_token_of_the_finished_loads() -> None:
    loads = design(4096)
    assert eta(loads, {}, 0.0) is None
    first = loads[0]
    left = eta(loads, {first.name: 10.0}, 10.0)
    assert left is not None
    rest = sum(d.tokens for d in loads[1:])
    assert abs(left - 10.0 * rest / first.tokens) < 1e-6
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
