"""The UI's small pure helpers: the Server panel projection, workload parsing, field text."""

from __future__ import annotations

import math

from ui_fakes import kv_failure

from tui.domain.events import (
    Exited,
    Failed,
    KvCacheReported,
    Launched,
    Ready,
    ServerState,
    Stage,
    StageReached,
)
from tui.domain.flags.serve import ServeFlags, flag_spec
from tui.domain.record import apply
from tui.domain.results import RunRecord
from tui.domain.workload import LoadSpec
from tui.ui.form_values import flag_text, parse_workload
from tui.ui.server_view import project
from tui.ui.widgets.log_tail import is_polling_noise

RUN = RunRecord(id=2, label="#2", flags=ServeFlags(model="m"))


def test_the_server_view_follows_a_start_to_ready_then_exit() -> None:
    run = apply(RUN, Launched(pid=7, argv=("vllm",), log_path=None))
    run = apply(run, StageReached(Stage.LAUNCHING, 0.0))
    view = project(run, ServerState.STARTING, pid=7, since_launch=3.0)
    assert (view.pid, view.stage, view.run_label, view.since_launch) == (7, "launching", "#2", 3.0)
    run = apply(run, StageReached(Stage.PROFILING, 12.5))
    view = project(run, ServerState.STARTING, pid=7)
    assert (view.stage, view.stage_at) == ("profiling memory", 12.5)
    run = apply(run, KvCacheReported("GPU", 1136, 400, 2.84))
    run = apply(run, Ready(elapsed=30.0))
    view = project(run, ServerState.READY, pid=7, since_launch=31.0)
    assert (view.state, view.ready_after, view.kv_tokens, view.max_concurrency) == (
        ServerState.READY,
        30.0,
        1136,
        2.84,
    )
    assert view.since_launch is None  # the clock shows only while it starts
    view = project(apply(run, Exited(exit_code=0, requested=True)), ServerState.STOPPED, pid=7)
    assert (view.state, view.exit_code) == (ServerState.STOPPED, 0)


def test_a_failure_replaces_the_stage_with_the_diagnosis() -> None:
    run = apply(RUN, Failed(20.0, 1, kv_failure()))
    view = project(run, ServerState.FAILED)
    assert view.failure == kv_failure().summary and view.exit_code == 1


def test_a_server_found_running_shows_ready_without_a_start_time() -> None:
    view = project(apply(RUN, Ready(elapsed=0.0, timed=False)), ServerState.READY, pid=9)
    assert view.stage == "ready" and view.ready_after is None and view.pid == 9


def test_workload_fields_parse_into_a_load_spec_or_per_field_problems() -> None:
    base = LoadSpec(num_prompts=64, max_concurrency=16)
    spec, problems = parse_workload(
        base, {"input_len": "256", "max_concurrency": "", "request_rate": "", "endpoint": "chat"}
    )
    assert problems == []
    assert spec == LoadSpec(
        num_prompts=64,
        input_len=256,
        max_concurrency=None,
        request_rate=math.inf,
        endpoint="chat",
    )
    spec, problems = parse_workload(base, {"input_len": "lots", "num_prompts": "0"})
    assert spec is None
    assert [p.field for p in problems] == ["input_len"]  # type errors first, like the flags
    spec, problems = parse_workload(base, {"num_prompts": "0"})
    assert spec is None and problems[0].field == "num_prompts"
    assert "greater than or equal to 1" in problems[0].message


def test_field_text_round_trips_through_the_domain_parser() -> None:
    for name, value in (
        ("enable_prefix_caching", True),
        ("enable_prefix_caching", False),
        ("gpu_memory_utilization", 0.95),
        ("max_model_len", 512),
        ("kv_cache_dtype", "fp8"),
    ):
        spec = flag_spec(name)
        assert spec.parse(flag_text(spec, value)) == value
    assert flag_text(flag_spec("max_model_len"), None) == ""


def test_the_log_tail_leaves_out_the_consoles_own_polling() -> None:
    assert is_polling_noise('INFO:     127.0.0.1:44900 - "GET /metrics HTTP/1.1" 200 OK')
    assert is_polling_noise('INFO:     127.0.0.1:44900 - "GET /health HTTP/1.1" 200 OK')
    assert not is_polling_noise('INFO:     127.0.0.1:44900 - "POST /v1/completions HTTP/1.1" 200')
    assert not is_polling_noise("INFO 01-01 [gpu_worker.py:298] Available KV cache memory: 1.3 GiB")


def test_a_fixs_settings_text_names_the_environment_it_sets_or_restores() -> None:
    from tui.domain.diagnosis import Fix
    from tui.ui.run_detail_text import fix_settings_text

    env_fix = Fix(title="V1 runner", env={"VLLM_USE_V2_MODEL_RUNNER": "0"})
    settings = {"env": (("VLLM_USE_V2_MODEL_RUNNER", "0"),)}
    assert fix_settings_text(env_fix, settings) == "environment: VLLM_USE_V2_MODEL_RUNNER=0"
    revert = Fix(title="fp8", set={"quantization": "fp8"})
    text = fix_settings_text(revert, {"quantization": "fp8", "env": ()})
    assert text == "quantization=fp8\nenvironment: none"
    assert fix_settings_text(revert) == "quantization=fp8"
