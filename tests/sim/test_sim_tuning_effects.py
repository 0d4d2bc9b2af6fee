"""Each effect of the simulator's cost model moves the way it does on hardware.

The proving ground for auto-tune (issue 13 item 7): every test runs the same command line
at several values of one flag on the virtual clock (:mod:`tui.sim.whatif`) and checks the
direction of the change, never a hard-coded number. The vLLM behaviour each effect
imitates is documented in ``tui/sim/README.md`` ("Cost model").
"""

from __future__ import annotations

from tui.sim.argv import parse_command
from tui.sim.startup import check_command
from tui.sim.whatif import Outcome, ScenarioError, Workload, run_argv

M8B = "meta-llama/Llama-3.1-8B-Instruct"
H100 = [M8B, "--sim-gpu", "h100-80gb", "--max-model-len", "8192"]


def mean(values: list[float]) -> float:
    assert values
    return sum(values) / len(values)


def test_throughput_saturates_and_latency_rises_with_max_num_seqs() -> None:
    work = Workload(num_requests=160, input_len=256, output_len=64)
    runs: dict[int, Outcome] = {}
    for seqs in (8, 32, 128):
        runs[seqs] = run_argv([*H100, "--max-num-seqs", str(seqs)], work)
    thr = {s: o.output_throughput for s, o in runs.items()}
    itl = {s: mean(o.itl()) for s, o in runs.items()}
    assert thr[8] < thr[32] < thr[128]
    # Saturating: quadrupling the batch again buys less than the first quadrupling did.
    assert thr[128] / thr[32] < thr[32] / thr[8]
    assert itl[8] < itl[32] < itl[128]


def test_max_num_batched_tokens_trades_ttft_against_itl() -> None:
    """A small budget chunks prompts over many steps (TTFT up); a big one stalls decodes."""
    work = Workload(num_requests=120, input_len=2048, output_len=128, rate=20.0)
    small = run_argv([*H100, "--max-num-seqs", "256", "--max-num-batched-tokens", "512"], work)
    big = run_argv([*H100, "--max-num-seqs", "256", "--max-num-batched-tokens", "8192"], work)
    assert mean(big.ttft()) < mean(small.ttft())
    assert Outcome.pct(big.itl(), 99) > Outcome.pct(small.itl(), 99)


def test_kv_capacity_caps_concurrency_and_preempts() -> None:
    work = Workload(num_requests=64, input_len=512, output_len=256)
    roomy = run_argv([*H100, "--max-num-seqs", "64"], work)
    tight = run_argv([*H100, "--max-num-seqs", "64", "--num-gpu-blocks-override", "600"], work)
    assert roomy.result.num_preemptions == 0
    assert tight.result.num_preemptions > 0
    assert tight.output_throughput < roomy.output_throughput
    assert len(tight.requests) == len(roomy.requests) == 64  # preempted work is redone


def test_prefix_caching_pays_off_with_a_shared_prefix() -> None:
    work = Workload(num_requests=100, input_len=128, output_len=32, prefix_len=896, rate=20.0)
    cached = run_argv([*H100, "--enable-prefix-caching"], work)
    uncached = run_argv([*H100, "--no-enable-prefix-caching"], work)
    assert cached.prefix_hit_rate > 0.5 and uncached.prefix_hit_rate == 0
    assert mean(cached.ttft()) < mean(uncached.ttft())
    unique = run_argv([*H100, "--enable-prefix-caching"], Workload(100, 1024, 32, rate=20.0))
    assert unique.prefix_hit_rate < 0.05


def _lora(*flags: str, adapters: tuple[str, ...] = ()) -> Outcome:
    work = Workload(num_requests=96, input_len=256, output_len=48, adapters=adapters)
    return run_argv([*H100, "--max-num-seqs", "64", *flags], work)


def test_lora_adds_latency_growing_with_rank_and_adapters() -> None:
    off = _lora()
    enabled = _lora("--enable-lora")
    rank16 = _lora("--enable-lora", "--max-lora-rank", "16", adapters=("a",))
    rank64 = _lora("--enable-lora", "--max-lora-rank", "64", adapters=("a",))
    assert mean(off.itl()) < mean(enabled.itl()) < mean(rank16.itl()) < mean(rank64.itl())
    one = _lora("--enable-lora", "--max-loras", "4", adapters=("a",))
    four = _lora("--enable-lora", "--max-loras", "4", adapters=("a", "b", "c", "d"))
    assert mean(one.itl()) < mean(four.itl())


def test_too_few_lora_slots_serialise_adapters() -> None:
    adapters = ("a", "b", "c", "d")
    one_slot = _lora("--enable-lora", "--max-loras", "1", adapters=adapters)
    four_slots = _lora("--enable-lora", "--max-loras", "4", adapters=adapters)
    assert Outcome.pct(four_slots.e2e(), 99) < Outcome.pct(one_slot.e2e(), 99)
    assert four_slots.output_throughput > one_slot.output_throughput


def test_lora_slots_take_kv_memory() -> None:
    def blocks(*flags: str) -> int:
        checked = check_command(parse_command([*H100, *flags]))
        assert checked.plan is not None and checked.plan.capacity is not None
        return checked.plan.capacity.num_blocks

    base = blocks()
    assert blocks("--enable-lora", "--max-loras", "1") < base
    assert blocks("--enable-lora", "--max-loras", "8", "--max-lora-rank", "64") < blocks(
        "--enable-lora", "--max-loras", "1"
    )


def test_gpu_memory_utilization_probes_fail_above_what_fits() -> None:
    """auto_tune.sh's probe: 0.98 down to 0.90; with memory in use, the top ones fail."""
    argv = [M8B, "--sim-gpu", "rtx4090-24gb", "--max-model-len", "4096", "--sim-gpu-used-gb", "1"]
    results = []
    for step in range(9):
        util = round(0.98 - 0.01 * step, 2)
        try:
            run_argv([*argv, "--gpu-memory-utilization", str(util)], Workload(4, 64, 8))
            results.append((util, None))
        except ScenarioError as exc:
            results.append((util, str(exc)))
    failed = [u for u, error in results if error is not None]
    started = [u for u, error in results if error is None]
    assert failed and started
    assert min(failed) > max(started)  # a probe fails exactly when it asks for too much
    message = next(error for _u, error in results if error is not None)
    assert "Free memory on device cuda:0" in message
    assert "is less than desired GPU memory utilization" in message
