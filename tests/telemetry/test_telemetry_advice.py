"""Advice rules: each holds only while its condition holds and names a flag and a value."""

from __future__ import annotations

from tui.domain.advice import AdviceInputs, advise
from tui.domain.flags.serve import ServeFlags
from tui.domain.telemetry import GpuDevice, GpuSample, ServerMetrics, SourceStatus

GIB = 2**30
FLAGS = ServeFlags(model="m", max_model_len=8192)


def window(n: int = 10, **values: object) -> list[ServerMetrics]:
    """``n`` samples a second apart; a list value gives each sample its own."""
    out = []
    for i in range(n):
        fields = {k: (v[i] if isinstance(v, list) else v) for k, v in values.items()}
        out.append(ServerMetrics(t=float(i), status=SourceStatus.OK, **fields))  # type: ignore[arg-type]
    return out


def gpu(used_gib: float, total_gib: float = 80) -> GpuSample:
    device = GpuDevice(
        0, "H100", memory_used=int(used_gib * GIB), memory_total=int(total_gib * GIB)
    )
    return GpuSample(t=9.0, source="nvml", status=SourceStatus.OK, devices=(device,))


def codes(inputs: AdviceInputs) -> dict[str, dict[str, object]]:
    return {a.code: (a.fix.set if a.fix else {}) for a in advise(inputs)}


def test_quiet_when_all_is_well() -> None:
    samples = window(kv_cache_usage=0.3, num_waiting=0.0, num_running=4.0)
    assert advise(AdviceInputs(samples, FLAGS, gpu(70))) == []
    assert advise(AdviceInputs([], FLAGS)) == []


def test_kv_saturated_with_waiting_asks_for_the_free_gpu_memory_first() -> None:
    samples = window(kv_cache_usage=0.99, num_waiting=5.0, num_running=30.0)
    # 0.92 of 80 GiB used leaves 8 %: raise to 0.92 + 0.08 - 0.05 = 0.95 (the cap)
    found = codes(AdviceInputs(samples, FLAGS, gpu(73.6)))
    assert found["kv_saturated"] == {"gpu_memory_utilization": 0.95}


def test_kv_saturated_on_a_full_gpu_suggests_fp8_kv() -> None:
    samples = window(kv_cache_usage=0.99, num_waiting=5.0, num_running=30.0)
    assert codes(AdviceInputs(samples, FLAGS, gpu(79)))["kv_saturated"] == {"kv_cache_dtype": "fp8"}
    fp8 = FLAGS.replace(kv_cache_dtype="fp8")
    (advice,) = advise(AdviceInputs(samples, fp8, gpu(79)))
    assert advice.fix is None and "tensor_parallel_size" in advice.message


def test_kv_saturated_only_while_it_holds() -> None:
    # saturated earlier in the window, not in the newest samples: no advice now
    kv = [0.99] * 7 + [0.5] * 3
    samples = window(kv_cache_usage=kv, num_waiting=[3.0] * 7 + [0.0] * 3)
    assert "kv_saturated" not in codes(AdviceInputs(samples, FLAGS, gpu(79)))


def test_preemptions_suggest_a_smaller_batch() -> None:
    samples = window(preemptions_total=[0, 0, 0, 2, 2, 5, 5, 5, 5, 5], num_running=[40.0] * 10)
    found = codes(AdviceInputs(samples, FLAGS))
    assert found["preemptions"] == {"max_num_seqs": 30}
    # a restart in the window (counter drops to 0) is not counted as growth
    restart = window(preemptions_total=[9, 9, 0, 0, 0, 0, 0, 0, 0, 0], num_running=[4.0] * 10)
    assert "preemptions" not in codes(AdviceInputs(restart, FLAGS))


def test_low_prefix_hit_rate_with_caching_on() -> None:
    extra = [
        {"prefix_cache_queries_total": 1000.0 * i, "prefix_cache_hits_total": 10.0 * i}
        for i in range(10)
    ]
    samples = window(extra=extra, prefix_caching=True)
    assert codes(AdviceInputs(samples, FLAGS))["prefix_cache_low"] == {
        "enable_prefix_caching": False
    }
    off = window(extra=extra, prefix_caching=False)
    assert "prefix_cache_low" not in codes(AdviceInputs(off, FLAGS))
    hits = [
        {"prefix_cache_queries_total": 1000.0 * i, "prefix_cache_hits_total": 500.0 * i}
        for i in range(10)
    ]
    assert "prefix_cache_low" not in codes(AdviceInputs(window(extra=hits), FLAGS))


def test_largest_request_far_below_max_model_len() -> None:
    samples = window(largest_request_tokens=700.0)
    assert codes(AdviceInputs(samples, FLAGS))["max_model_len_headroom"] == {"max_model_len": 1024}
    # the server's real max_model_len beats the flags (a default left unset)
    real = codes(AdviceInputs(samples, ServeFlags(model="m"), max_model_len=2048))
    assert real["max_model_len_headroom"] == {"max_model_len": 1024}
    near = window(largest_request_tokens=5000.0)
    assert "max_model_len_headroom" not in codes(AdviceInputs(near, FLAGS))


def test_gpu_headroom_under_kv_pressure() -> None:
    samples = window(kv_cache_usage=[0.85] * 10, num_waiting=0.0, gpu_memory_utilization=0.6)
    # 48 of 80 GiB used: 40 % free -> 0.6 + 0.4 - 0.05 = 0.95
    found = codes(AdviceInputs(samples, FLAGS, gpu(48)))
    assert found["gpu_memory_headroom"] == {"gpu_memory_utilization": 0.95}
    calm = window(kv_cache_usage=0.2, gpu_memory_utilization=0.6)
    assert "gpu_memory_headroom" not in codes(AdviceInputs(calm, FLAGS, gpu(48)))


def test_one_flag_is_suggested_once_and_warnings_come_first() -> None:
    samples = window(
        kv_cache_usage=0.99,
        num_waiting=2.0,
        num_running=20.0,
        gpu_memory_utilization=0.6,
        largest_request_tokens=300.0,
    )
    found = advise(AdviceInputs(samples, FLAGS, gpu(48)))
    assert [a.code for a in found] == ["kv_saturated", "max_model_len_headroom"]
    assert found[0].severity == "warn"
