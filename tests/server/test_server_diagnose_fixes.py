"""Fixes that work: pre-flight checked through the injected checker, overriding flags removed
first, never the value that just failed, bounds computed when vLLM gives no estimate."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from tui.domain.diagnosis import Diagnosis
from tui.domain.flags.serve import ServeFlags, stored_context
from tui.domain.preflight import DeviceMemory, KvEstimate, estimate
from tui.server.diagnose import diagnose, preflight_checker
from tui.server.diagnose.kv import bound_from_gib
from tui.sim.catalog import GIB, MIB, resolve_gpu, resolve_model
from tui.sim.memory import SimHardware, plan_memory, resolve

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
CORE = "(EngineCore pid=4200) ERROR 11-21 10:00:30 [core.py:1510] "

KV_TOO_SMALL = (
    CORE + "ValueError: To serve at least one request with the model's max seq len (131072), "
    "(16.0 GiB KV cache is needed, which is larger than the available KV cache memory (10.5 GiB). "
    "Based on the available memory, the estimated maximum model length is 85990. Try increasing "
    "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n"
)
CUDA_OOM = (
    CORE + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
    "total capacity of 9.77 GiB of which 1.06 GiB is free.\n"
)


def _sets(d: Diagnosis) -> list[dict[str, object]]:
    return [dict(f.set) for f in d.fixes]


# -- the injected check -----------------------------------------------------------------------
def test_fixes_the_check_passes_are_marked_and_the_others_withheld() -> None:
    flags = ServeFlags(model="m", max_model_len=131072)

    def check(fixed: ServeFlags) -> list[str]:
        if fixed.kv_cache_memory_bytes is not None:
            return ["--kv-cache-memory-bytes 16.01 GiB does not fit next to 14.99 GiB of weights"]
        return []

    d = diagnose(KV_TOO_SMALL, flags=flags, exit_code=1, check=check)
    assert _sets(d) == [{"max_model_len": 85984}]
    assert d.fixes[0].check == "passed"
    assert "pre-flight" in d.fixes[0].check_note
    (withheld,) = d.facts["withheld_fixes"]
    assert withheld.startswith("Set kv_cache_memory_bytes to ") and "does not fit" in withheld


def test_the_checker_sees_the_flags_each_fix_would_produce() -> None:
    flags = ServeFlags(model="m", max_model_len=131072, enforce_eager=True)
    seen: list[ServeFlags] = []

    def check(fixed: ServeFlags) -> list[str]:
        seen.append(fixed)
        return []

    d = diagnose(KV_TOO_SMALL, flags=flags, exit_code=1, check=check)
    assert seen[0].max_model_len == 85984
    assert all(s.enforce_eager is True for s in seen)  # the rest of the run's flags kept
    assert len(seen) == len(d.fixes)


def test_a_check_that_cannot_tell_says_so() -> None:
    d = diagnose(KV_TOO_SMALL, flags=ServeFlags(model="m"), exit_code=1, check=lambda _: None)
    assert d.fixes and all(f.check == "not_checked" for f in d.fixes)
    assert all("could not tell" in f.check_note for f in d.fixes)


def test_without_flags_or_without_a_check_nothing_is_claimed() -> None:
    asked: list[ServeFlags] = []

    def check(fixed: ServeFlags) -> list[str]:
        asked.append(fixed)
        return []

    no_flags = diagnose(KV_TOO_SMALL, exit_code=1, check=check)
    assert asked == []
    assert all(
        f.check == "not_checked" and "flags are not known" in f.check_note for f in no_flags.fixes
    )
    no_check = diagnose(KV_TOO_SMALL, flags=ServeFlags(model="m"), exit_code=1)
    assert all(f.check == "not_checked" for f in no_check.fixes)


def test_a_fix_whose_flags_are_invalid_is_withheld() -> None:
    # max_num_batched_tokens 64 < max_num_seqs 256 explicit: lowering max_model_len is fine,
    # but raising max_num_seqs past the batched tokens would be refused by vLLM itself.
    text = (
        CORE + "ValueError: max_num_active_seqs (512) cannot be greater than max_num_seqs (256).\n"
    )
    flags = ServeFlags(model="m", max_num_seqs=256, max_num_batched_tokens=300)
    d = diagnose(text, flags=flags, exit_code=1, check=lambda _: [])
    assert d.fixes == []
    assert "invalid" in d.facts["withheld_fixes"][0]


# -- overrides first, never what failed ----------------------------------------------------
def test_an_oom_with_an_explicit_kv_size_removes_it_first() -> None:
    flags = ServeFlags(model="m", kv_cache_memory_bytes=3830 * MIB, gpu_memory_utilization=0.9)
    d = diagnose(CUDA_OOM, flags=flags, exit_code=1)
    assert d.kind == "out_of_memory"
    assert d.fixes[0].set == {"kv_cache_memory_bytes": None}
    assert "Remove kv_cache_memory_bytes" in d.fixes[0].title
    # Lowering the utilization alone would change nothing while the explicit size is set.
    util = [f for f in d.fixes if "gpu_memory_utilization" in f.set]
    assert util and all(f.set["kv_cache_memory_bytes"] is None for f in util)


def test_the_override_from_the_log_counts_too() -> None:
    text = (
        "(APIServer pid=1) INFO 11-21 10:00:00 [api_utils.py:286] non-default args: "
        "{'model_tag': 'm', 'model': 'm', 'num_gpu_blocks_override': 64}\n" + CUDA_OOM
    )
    d = diagnose(text, exit_code=1)
    assert d.fixes[0].set == {"num_gpu_blocks_override": None}


def test_a_fix_that_changes_nothing_is_not_offered() -> None:
    # The run already has max_num_seqs 128: "lower max_num_seqs to 128" would change nothing.
    text = CORE + (
        "RuntimeError: CUDA out of memory occurred when warming up sampler with 256 dummy "
        "requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization`.\n"
    )
    flags = ServeFlags(model="m", max_num_seqs=128, gpu_memory_utilization=0.9)
    d = diagnose(text, flags=flags, exit_code=1)
    assert {"max_num_seqs": 128} not in _sets(d)
    assert _sets(d) == [{"gpu_memory_utilization": 0.85}]


def test_an_unknown_quantization_never_offers_itself() -> None:
    for q in ("fp8", "awq", "gptq"):
        listed = f"['{q}', 'aqlm', 'awq_marlin']"
        text = f"ValueError: Unknown quantization method: {q}. Must be one of {listed}."
        d = diagnose(text, exit_code=1)
        assert {"quantization": q} not in _sets(d)


def test_an_invalid_choice_without_a_close_match_still_offers_a_listed_choice() -> None:
    text = (
        "vllm serve: error: argument --dtype: invalid choice: 'int8' (choose from 'auto', "
        "'half', 'float16', 'bfloat16', 'float', 'float32')\n"
    )
    d = diagnose(text, exit_code=2)
    choices = {"auto", "half", "float16", "bfloat16", "float", "float32"}
    assert d.fixes[0].set["dtype"] in choices
    assert d.facts["suggested_value"] == d.fixes[0].set["dtype"]


# -- computed bounds -------------------------------------------------------------------------
@given(
    mml=st.integers(min_value=2048, max_value=2_000_000),
    bs=st.sampled_from([16, 32, 64, 128]),
    per_block=st.integers(min_value=64 * 1024, max_value=8 * MIB),
    share=st.floats(min_value=0.05, max_value=0.98),
)
def test_the_bound_from_rounded_gib_figures_always_fits(
    mml: int, bs: int, per_block: int, share: float
) -> None:
    needed = -(-mml // bs) * per_block
    available = int(needed * share)
    # What vLLM prints: both figures rounded to 0.01 GiB (utils/mem_utils.py:30-31).
    bound = bound_from_gib(mml, bs, round(needed / GIB, 2), round(available / GIB, 2))
    assert bound % bs == 0 and 0 <= bound < mml
    if bound:
        blocks = bound // bs
        assert (blocks + 1) * per_block <= available  # + the null block


# -- the seed-000 story with the real pure estimator -------------------------------------------
def _sim_failure(flags: ServeFlags) -> str:
    entry = resolve_model(LLAMA_8B)
    plan = plan_memory(resolve(flags, entry, SimHardware(resolve_gpu("rtx3080-10gb"), 1, 0)))
    assert plan.failure is not None
    return CORE + "ValueError: " + plan.failure.message + "\n"


def _rtx3080_estimate(flags: ServeFlags) -> KvEstimate:
    entry = resolve_model(flags.model)
    gpu = resolve_gpu("rtx3080-10gb")
    return estimate(
        entry.shape,
        flags,
        DeviceMemory(gpu.total_bytes, gpu.total_bytes, "gpu", gpu.name),
        checkpoint_quantization=entry.checkpoint_quantization,
        embedding_params=entry.embedding_params,
    )


def test_seed_000_every_offered_fix_fits_by_the_real_preflight() -> None:
    """RTX 3080 10 GB, Llama-3.1-8B fp8, max_model_len 30576: the fixes the console offers."""
    flags = ServeFlags(model=LLAMA_8B, quantization="fp8", max_model_len=30576)
    assert not _rtx3080_estimate(flags).fits  # the story's failing start
    d = diagnose(
        _sim_failure(flags), flags=flags, exit_code=1, check=preflight_checker(_rtx3080_estimate)
    )
    assert d.kind == "kv_cache_too_small"
    assert d.fixes, "the max_model_len that fits must be offered"
    for fix in d.fixes:
        after = _rtx3080_estimate(flags.replace(**fix.set))
        assert fix.check == "passed"
        assert after.fits and after.warnings == [], (fix.title, after.warnings)
    # The old second fix (an explicit KV size next to 8 GiB of weights) does not fit: it is
    # withheld, with the pre-flight's reason, rather than offered to fail again.
    kv = [f for f in d.fixes if "kv_cache_memory_bytes" in f.set]
    assert kv == [] or all(_rtx3080_estimate(flags.replace(**f.set)).fits for f in kv)
    if not kv:
        assert any("kv_cache_memory_bytes" in w for w in d.facts["withheld_fixes"])


def test_seed_000_the_first_fix_is_vllms_estimate_rounded_to_blocks() -> None:
    flags = ServeFlags(model=LLAMA_8B, quantization="fp8", max_model_len=30576)
    d = diagnose(_sim_failure(flags), flags=flags, exit_code=1)
    est = d.facts["estimated_max_model_len"]
    assert d.fixes[0].set == {"max_model_len": est // 16 * 16}
    assert math.isclose(d.facts["max_model_len"], 30576)


def test_a_fix_for_a_flag_also_takes_it_out_of_the_pass_through_args() -> None:
    # The pass-through args follow the form's flags and vLLM keeps the last value: a
    # `--dtype bf16` left there would beat the fixed dtype and fail the same way again.
    text = (
        "vllm serve: error: argument --dtype: invalid choice: 'bf16' (choose from 'auto', "
        "'half', 'float16', 'bfloat16', 'float', 'float32')\n"
    )
    # (the form refuses it now; a launch from an older console, read back, still holds it)
    flags = ServeFlags.model_validate(
        {"model": "m", "extra_args": ("--seed", "3", "--dtype", "bf16")},
        context=stored_context(),
    )
    d = diagnose(text, flags=flags, exit_code=2)
    assert d.fixes[0].set == {"dtype": "bfloat16", "extra_args": ("--seed", "3")}
    argv = flags.replace(**d.fixes[0].set).to_argv()
    assert "bf16" not in argv and argv[argv.index("--dtype") + 1] == "bfloat16"


def test_an_override_the_detector_already_corrects_is_not_removed_instead() -> None:
    # kv_cache_memory_bytes 0 on the CPU backend: the detector sets a working size (1G);
    # "remove it" would fall back to the utilization sizing, which may not fit the node.
    text = (
        "(Worker pid=1) INFO 11-21 05:41:06 [cpu_worker.py:260] Explicitly set (0.0/8.34) GiB "
        "for KV cache on node 0.\n"
        "(EngineCore pid=2) ERROR 11-21 05:41:06 [core.py:1510] ValueError: No available memory "
        "for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the "
        "engine.\n"
    )
    d = diagnose(text, flags=ServeFlags(model="m", kv_cache_memory_bytes=0), exit_code=1)
    assert d.kind == "no_kv_cache_memory"
    assert d.fixes[0].set == {"kv_cache_memory_bytes": 2**30}
    assert {"kv_cache_memory_bytes": None} not in [f.set for f in d.fixes]
