"""Issue 31: a fix that, applied, can make the start succeed, never one the log rules out.

The logs here are built from vLLM's own wordings (cited in the detectors' modules) with the
numbers varied, so that the arithmetic, not a copy of one log, is what is checked.
"""

from __future__ import annotations

import re

import pytest
from diagnosis_corpus import CORPUS, HERE, ISSUES, Fixture, everything, load_all

from tui.domain.flags.serve import ServeFlags
from tui.server.diagnose import diagnose

_TORCH_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 500.00 MiB. GPU 0 has a "
    "total capacity of {total} GiB of which 20.00 MiB is free."
)
_CAPTURE = (
    'File "/x/torch/cuda/graphs.py", line 84, in capture_end\n    super().capture_end()\n'
    "RuntimeError: CUDA error: out of memory\n"
)


def _load_oom(model: str, total: float, dtype: str = "auto") -> str:
    return (
        f"INFO 01-01 00:00:00 [api_server.py:1] non-default args: {{'model': '{model}', "
        f"'dtype': '{dtype}'}}\n"
        'File "/x/vllm/model_executor/model_loader/loader.py", line 1, in load_model\n'
        + _TORCH_OOM.format(total=total)
        + "\n"
    )


def test_a_70b_model_on_a_16gb_card_is_said_not_to_fit_with_the_arithmetic() -> None:
    d = diagnose(_load_oom("meta-llama/Llama-2-70b-chat-hf", 15.57))
    assert d.kind == "weights_oom"
    assert d.fixes == []  # fp8 is 65 GiB, and the box shows no second GPU
    assert d.facts["weights_gib_estimate"] > d.facts["gpu_gib"]
    assert "does not fit this GPU" in d.summary and "15.57 GiB" in d.summary


def test_a_7b_model_in_fp32_on_22_gib_gets_a_16_bit_dtype_first() -> None:
    d = diagnose(_load_oom("Qwen/Qwen2.5-7B-Instruct", 22.0, dtype="float32"))
    assert d.kind == "weights_oom"
    assert d.fixes[0].set == {"dtype": "float16"}
    assert all("gpu_memory_utilization" not in f.set for f in d.fixes)


@pytest.mark.parametrize(("gpus", "offered"), [(1, False), (8, True)])
def test_more_gpus_only_where_the_box_has_them(gpus: int, offered: bool) -> None:
    listing = "".join(f"GPU {i}: NVIDIA A100-SXM4-80GB\n" for i in range(gpus))
    d = diagnose(listing + _load_oom("meta-llama/Llama-3.1-70B-Instruct", 79.1))
    tps = [f.set["tensor_parallel_size"] for f in d.fixes if "tensor_parallel_size" in f.set]
    assert bool(tps) is offered
    assert all(tp <= gpus for tp in tps)


def test_a_graph_capture_oom_never_offers_a_lower_utilization() -> None:
    d = diagnose(_CAPTURE)
    assert d.facts["stage"] == "cuda_graph_capture"
    assert [f.set for f in d.fixes] == [{"enforce_eager": True}]


def test_eager_is_not_offered_to_a_run_that_was_eager_and_the_refusal_is_said() -> None:
    flags = ServeFlags(model="m", enforce_eager=True, max_num_seqs=64)
    d = diagnose(_CAPTURE, flags=flags)
    assert [f.set for f in d.fixes] == [{"max_num_seqs": 32}]


def test_a_utilization_fix_the_log_rules_out_is_refused_with_its_reason() -> None:
    from tui.domain.diagnosis import Diagnosis, Fix
    from tui.server.diagnose.policy import finish
    from tui.server.diagnose.reading import LogView

    raw = Diagnosis(
        kind="weights_oom",
        summary="s",
        fixes=[
            Fix(title="Lower gpu_memory_utilization to 0.8", set={"gpu_memory_utilization": 0.8})
        ],
    )
    done = finish(raw, LogView("x", None, None), None)
    assert done.fixes == []
    assert "weights alone do not fit" in done.facts["refused_fixes"][0]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Worker proc VllmWorker-0 died unexpectedly (exit code: -9), shutting down", "SIGKILL"),
        ("Worker VllmWorkerProcess pid 12 died, exit code: -4", "SIGILL"),
        ("bash: line 1:  4242 Killed                  vllm serve m", "SIGKILL"),
        ("Illegal instruction (core dumped)", "SIGILL"),
    ],
)
def test_a_process_killed_by_the_host_is_named_by_its_signal(text: str, kind: str) -> None:
    d = diagnose(text + "\n")
    assert d.kind == "worker_killed" and d.facts["signal"] == kind


def test_a_killed_worker_with_cpu_offload_gives_host_ram_back() -> None:
    flags = ServeFlags(model="m", cpu_offload_gb=32)
    d = diagnose("Killed\n", flags=flags)
    assert [f.set for f in d.fixes] == [{"cpu_offload_gb": None}]


@pytest.mark.parametrize(
    "paste",
    [
        "max seq len (4096), (2.0 GiB KV cache is needed, which is larger than the available KV "
        "cache memory (1.0 GiB). Based on the available memory, the estimated maximum model "
        "length is 2048.",
        "max seq len 4096), (2.0 GiB KV cache is needed which is larger than the available KV "
        "cache memory 1.0 GiB Based on the available memory the estimated maximum model "
        "length is 2048",
        "max seq len [4096] [2.0 GiB KV cache is needed, which is larger than the available KV "
        "cache memory [1.0 GiB]. Based on the available memory, the estimated maximum model "
        "length is 2048.",
    ],
)
def test_the_kv_line_is_read_by_its_numbers_not_its_punctuation(paste: str) -> None:
    d = diagnose("ValueError: To serve at least one request with the model's " + paste + "\n")
    assert d.kind == "kv_cache_too_small"
    assert d.facts["estimated_max_model_len"] == 2048


# -- every cited log, the held-out set and their mangled pastes --------------------------------
# The rules below read the log text themselves (not the diagnosis' facts), so a detector that
# forgot a fact cannot hide a fix the log rules out.
# The run's own record (a config dump, the non-default args, a command line), not vLLM's advice
# "set 'enforce_eager=True' or use '--enforce-eager' in the CLI" in its capture notice.
_EAGER_ON = re.compile(r"enforce_eager=True,|'enforce_eager': True|(?<!')--enforce-eager(?![\w'-])")
_CAPTURE_TEXT = re.compile(r"capture_end|capture_model|Capturing|cudagraph", re.I)
_GPU_COUNT = (
    re.compile(r"^\W*GPU (\d+): ", re.M),  # collect_env's "GPU n: NVIDIA ..." lines
    re.compile(r"CUDA_VISIBLE_DEVICES\W{0,3}(\d+(?:,\d+)*)"),
)
_MEMORY_KINDS = frozenset(
    {"weights_oom", "out_of_memory", "kv_cache_too_small", "no_kv_cache_memory"}
)
_QUANTIZED_TEXT = re.compile(r"gptq|awq|marlin|bnb|bitsandbytes|gguf|int4|w4a16", re.I)


def _gpus_shown(text: str) -> int:
    """The GPUs the log itself shows (0 when it shows none)."""
    listed = {int(n) for n in _GPU_COUNT[0].findall(text)}
    visible = [len(v.split(",")) for v in _GPU_COUNT[1].findall(text)]
    return max([len(listed), *visible, 0])


def _ruled_out(fixture: Fixture, kind: str, fix_set: dict[str, object], text: str) -> str | None:
    """Why the log text rules this fix out, or ``None``."""
    if "gpu_memory_utilization" in fix_set and (
        kind == "weights_oom" or (kind == "out_of_memory" and _CAPTURE_TEXT.search(text))
    ):
        return "a lower utilization for weights or CUDA graphs"
    eager_run = _EAGER_ON.search(text) or (fixture.flags or {}).get("enforce_eager") is True
    if fix_set.get("enforce_eager") is True and eager_run:
        return "eager mode for a run already eager"
    tp = fix_set.get("tensor_parallel_size")
    raises_tp = kind in _MEMORY_KINDS  # elsewhere a TP fix lowers the run's size
    if raises_tp and isinstance(tp, int) and tp > 1 and tp > _gpus_shown(text):
        return f"tensor_parallel_size {tp} with {_gpus_shown(text)} GPUs shown"
    quantize = kind == "weights_oom" and fix_set.get("quantization") == "fp8"
    if quantize and _QUANTIZED_TEXT.search(text):
        return "fp8 on load for a checkpoint already quantized"
    return None


_ALL = [*load_all(CORPUS), *load_all(ISSUES), *load_all(HERE / "heldout")]


@pytest.mark.parametrize("mangle", [False, True], ids=["clean", "mangled"])
@pytest.mark.parametrize("fixture", _ALL, ids=lambda f: f.name)
def test_no_offered_fix_is_one_the_log_rules_out(fixture: Fixture, mangle: bool) -> None:
    text = everything(fixture.text) if mangle else fixture.text
    d = fixture.diagnose(text)
    for fix in d.fixes:
        assert not fix.is_empty, fix
        assert _ruled_out(fixture, d.kind, fix.set, fixture.text) is None, (fix.title, d.kind)


@pytest.mark.parametrize(
    ("took_line", "failure", "dtype", "first_fix"),
    [
        (  # V1 gpu_model_runner.py; a 7B in 16 bits on a 16 GB card
            "Model loading took {took} GiB and 5.2 seconds",
            _TORCH_OOM.format(total="{total}"),
            "auto",
            {"quantization": "fp8"},
        ),
        (  # 0.6.4-0.10 worker.py's profile; a 7B in fp32 on a 32 GB card
            "model weights take {took}GiB; non_torch_memory takes 0.39GiB; PyTorch activation "
            "peak memory takes 2.53GiB; the rest of the memory reserved for KV Cache is -3.2GiB.",
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine.\n"
            "GPU 0 has a total capacity of {total} GiB of which 20.00 MiB is free.",
            "float32",
            {"dtype": "float16"},
        ),
    ],
)
def test_weights_that_loaded_but_fill_the_gpu_get_no_utilization_fix(
    took_line: str, failure: str, dtype: str, first_fix: dict[str, object]
) -> None:
    took, total = (14.9, 15.69) if dtype == "auto" else (28.4, 31.5)
    log = (
        f"INFO 01-01 00:00:00 [api_server.py:1] non-default args: {{'model': 'm', "
        f"'dtype': '{dtype}'}}\n"
        + took_line.format(took=took)
        + "\n"
        + failure.format(total=total)
        + "\n"
    )
    d = diagnose(log)
    assert d.kind == "weights_oom" and d.facts["weights_gib"] == took
    assert d.fixes and d.fixes[0].set == first_fix
    assert all("gpu_memory_utilization" not in f.set for f in d.fixes)


def test_weights_with_room_to_spare_are_not_blamed() -> None:
    log = "Model loading took 6.1 GiB and 2.0 seconds\n" + _TORCH_OOM.format(total=79.1) + "\n"
    assert diagnose(log).kind == "out_of_memory"


@pytest.mark.parametrize(
    ("before", "eager_offered"),
    [
        ("$ vllm serve m --enforce-eager\n", False),  # the run's own command line
        ("llm = LLM(model='m', enforce_eager=True)\n", False),  # the Python call
        # vLLM's advice in its capture notice (0.4-0.10 model_runner.py), quoted or not.
        (
            "INFO Capturing the model for CUDA graphs. To run the model in eager mode, set "
            "'enforce_eager=True' or use '--enforce-eager' in the CLI.\n",
            True,
        ),
        (
            "INFO Capturing the model for CUDA graphs. To run the model in eager mode, set "
            "enforce_eager=True or use --enforce-eager in the CLI.\n",
            True,
        ),
    ],
)
def test_eager_is_read_from_a_pasted_command_not_from_vllms_advice(
    before: str, eager_offered: bool
) -> None:
    d = diagnose(before + _CAPTURE)
    assert ({"enforce_eager": True} in [f.set for f in d.fixes]) is eager_offered


@pytest.mark.parametrize(
    "listing",
    [
        "".join(
            f"|   {i}  NVIDIA A100-SXM4-80GB          On  | 00000000:0{i}:00.0 Off |\n"
            for i in range(8)
        ),
        "".join("NVIDIA A100 80GB PCIe, 8.0, 81920 MiB\n" for _ in range(8)),
        "INFO [parallel_state.py:1] rank 0 in world size 8 is assigned as DP rank 0, PP rank 0, "
        "TP rank 0\n",
    ],
)
def test_the_box_is_read_from_nvidia_smi_and_the_world_size(listing: str) -> None:
    d = diagnose(listing + _load_oom("meta-llama/Llama-3.1-70B-Instruct", 79.1))
    assert d.facts["gpus_on_box"] == 8
    assert {"tensor_parallel_size": 2} in [f.set for f in d.fixes]
