"""Startup failures of the real vLLM, diagnosed from its own log, and their fixes applied.

Each case launches the real CPU build with a broken configuration and checks that the
supervisor reports ``Failed`` as soon as the process exits (not at a timeout), that the
diagnosis carries vLLM's own numbers, and that applying the first fix (``flags.replace(
**fix.set)``) on the same supervisor starts a server that becomes ready.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fakes.supervisor import Supervisor
from realvllm_support import (
    CPU_BLOCK_SIZE,
    HANG_S,
    KV_64M,
    MIB,
    POOL_GRACE_S,
    STARTUP_TIMEOUT_S,
    EventRecorder,
    SupervisorFactory,
    assert_nothing_left,
    exit_time,
    free_port,
    free_port_pair,
    good_flags,
    kv_bytes_per_token,
    log_tail,
    max_position_embeddings,
    served_max_model_len,
    settle,
)

from tui.domain.diagnosis import Diagnosis
from tui.domain.events import Failed, KvCacheReported, Launched, Ready, ServerState
from tui.domain.flags.serve import ServeFlags
from tui.server.provision import ProvisionedVllm

# The session's event loop: a fixed server started here is kept for a later test of the
# same flags (``supervisors.keep``), and its watchers run on the loop that started it.
pytestmark = [pytest.mark.realvllm, pytest.mark.asyncio(loop_scope="session")]

# The supervisor handles an exit within about two seconds (it drains the output for up
# to 1 s and sweeps the tree); a generous bound on two busy cores, far below any timeout.
FAILED_AFTER_EXIT_S = 5.0


async def _launch_expecting_failure(
    sup: Supervisor, rec: EventRecorder, flags: ServeFlags
) -> Failed:
    """Launch ``flags``; the process must exit by itself and ``Failed`` follow promptly."""
    await sup.start(flags)
    launched = rec.of(Launched)
    assert launched, f"not launched: {rec.lifecycle()}"
    pid = launched[0].pid
    exited_at = asyncio.create_task(exit_time(pid, STARTUP_TIMEOUT_S))
    state = await settle(sup)
    assert state == "failed", f"expected a failed start, got {state}{log_tail(sup)}"
    exit_at = await asyncio.wait_for(exited_at, timeout=HANG_S)
    failed_at = rec.time_of(Failed)
    (failed,) = rec.of(Failed)
    assert exit_at is not None and failed_at is not None
    assert failed_at - exit_at < FAILED_AFTER_EXIT_S, (
        f"Failed came {failed_at - exit_at:.1f} s late"
    )
    assert failed.exit_code not in (None, 0), failed
    assert "timeout_s" not in failed.diagnosis.facts, "diagnosed as a timeout, not the exit"
    assert not rec.of(Ready)
    assert sup.state is ServerState.FAILED
    assert_nothing_left(sup, [], pid)
    return failed


async def _fix_starts(sup: Supervisor, rec: EventRecorder, fixed: ServeFlags) -> Ready:
    """Start ``fixed`` on the same supervisor; it must become ready."""
    rec.clear()
    await sup.start(fixed)
    state = await settle(sup)
    assert state == "ready", f"the fixed flags did not start: {state}{log_tail(sup)}"
    (ready,) = rec.of(Ready)
    return ready


def _first_fix(diagnosis: Diagnosis) -> dict[str, object]:
    assert diagnosis.fixes, f"no fix offered: {diagnosis}"
    return diagnosis.fixes[0].set


async def test_kv_cache_too_small_with_vllms_numbers_and_the_fix_starts(
    real_vllm: ProvisionedVllm, supervisors: SupervisorFactory
) -> None:
    sup, rec = supervisors()
    # The long-context copy (131,072 positions) with 16 MiB of KV and no max_model_len.
    flags = ServeFlags(
        model=str(real_vllm.model_long),
        enforce_eager=True,
        kv_cache_memory_bytes=16 * MIB,
        port=free_port(),
    )
    failed = await _launch_expecting_failure(sup, rec, flags)
    d = failed.diagnosis
    assert d.kind == "kv_cache_too_small", d
    assert d.facts["max_model_len"] == max_position_embeddings(real_vllm.model_long) == 131_072
    # vLLM's own estimate, read from its error text (16 MiB / 512 B = 256 blocks of 128,
    # minus the null block = 255 x 128 = 32,640 tokens).
    assert d.facts["estimated_max_model_len"] == 32_640
    assert "the estimated maximum model length is 32640" in sup.log_lines.text()
    assert "32640" in d.evidence
    fix = _first_fix(d)
    assert set(fix) == {"max_model_len"}
    fixed_len = fix["max_model_len"]
    assert isinstance(fixed_len, int)
    assert 0 < fixed_len <= 32_640 and fixed_len % CPU_BLOCK_SIZE == 0

    ready = await _fix_starts(sup, rec, flags.replace(**fix))
    (kv,) = rec.of(KvCacheReported)
    assert kv.max_model_len == fixed_len
    assert kv.tokens == 16 * MIB // kv_bytes_per_token(real_vllm.model_long)
    assert ready.max_concurrency is not None and ready.max_concurrency >= 1.0
    assert await served_max_model_len(sup.base_url) == fixed_len


async def test_no_kv_cache_memory_and_the_fix_starts(
    real_vllm: ProvisionedVllm, supervisors: SupervisorFactory
) -> None:
    sup, rec = supervisors()
    flags = good_flags(real_vllm, kv_cache_memory_bytes=0)
    failed = await _launch_expecting_failure(sup, rec, flags)
    d = failed.diagnosis
    assert d.kind == "no_kv_cache_memory", d
    assert d.facts.get("kv_gib") == 0.0
    assert "No available memory for the cache blocks" in d.evidence
    fix = _first_fix(d)
    assert set(fix) == {"kv_cache_memory_bytes"}
    kv_bytes = fix["kv_cache_memory_bytes"]
    assert isinstance(kv_bytes, int) and kv_bytes > 0

    await _fix_starts(sup, rec, flags.replace(**fix))
    (kv,) = rec.of(KvCacheReported)
    assert kv.tokens == kv_bytes // kv_bytes_per_token(real_vllm.model)


async def test_invalid_value_in_pass_through_args_is_diagnosed(
    real_vllm: ProvisionedVllm, supervisors: SupervisorFactory
) -> None:
    """ServeFlags refuses max_num_seqs 0, in its field and in the extra args alike; a run
    recorded by an older vtc may still hold it verbatim, so the flags are built unchecked.
    The fixed server (one sequence at a time) is kept for the server-latency test."""
    sup, rec = supervisors(grace_s=POOL_GRACE_S)
    flags = good_flags(real_vllm).model_copy(update={"extra_args": ("--max-num-seqs", "0")})
    failed = await _launch_expecting_failure(sup, rec, flags)
    d = failed.diagnosis
    assert d.kind == "invalid_flag_value", d
    assert d.facts["flag"] == "max_num_seqs" and d.facts["value"] == 0
    assert d.facts["config"] == "SchedulerConfig"
    fix = _first_fix(d)
    assert fix.get("max_num_seqs") == 1
    fixed = flags.replace(**fix)
    # The bad value leaves the pass-through args too: vLLM would read it last otherwise.
    assert "--max-num-seqs" not in fixed.extra_args
    await _fix_starts(sup, rec, fixed)
    supervisors.keep(sup, rec)


async def test_unknown_flag_and_its_removal(
    real_vllm: ProvisionedVllm, supervisors: SupervisorFactory
) -> None:
    sup, rec = supervisors()
    flags = good_flags(real_vllm, extra_args=("--no-such-flag",))
    failed = await _launch_expecting_failure(sup, rec, flags)
    assert failed.exit_code == 2  # argparse
    d = failed.diagnosis
    assert d.kind == "unknown_flag", d
    assert d.facts["arguments"] == ["--no-such-flag"]
    assert "--no-such-flag" in d.fixes[0].title
    # The fix removes the pass-through argument, which gives back exactly the known-good
    # flags that test_realvllm_loop.py starts (not started again here, to save a start).
    fix = _first_fix(d)
    assert fix == {"extra_args": ()}
    assert flags.replace(**fix) == good_flags(real_vllm, port=flags.port)


async def test_max_model_len_above_the_model_and_the_fix_starts(
    real_vllm: ProvisionedVllm, supervisors: SupervisorFactory
) -> None:
    sup, rec = supervisors()
    flags = good_flags(real_vllm, max_model_len=8192)
    failed = await _launch_expecting_failure(sup, rec, flags)
    d = failed.diagnosis
    assert d.kind == "max_model_len_exceeds_model", d
    model_max = max_position_embeddings(real_vllm.model)
    assert d.facts["max_model_len"] == 8192
    assert d.facts["derived_max_model_len"] == model_max == 4096
    fix = _first_fix(d)
    assert fix == {"max_model_len": 4096}

    await _fix_starts(sup, rec, flags.replace(**fix))
    (kv,) = rec.of(KvCacheReported)
    assert kv.max_model_len == 4096
    assert kv.tokens == KV_64M // kv_bytes_per_token(real_vllm.model)
    assert await served_max_model_len(sup.base_url) == 4096


# -- port in use -----------------------------------------------------------------------------
class _Impostor(BaseHTTPRequestHandler):
    """Answers like a healthy vLLM serving ``model``: the trap a /health-only check falls in."""

    model = ""
    hits: list[str] = []  # noqa: RUF012 (set per server below)

    def do_GET(self) -> None:
        self.hits.append(self.path)
        if self.path == "/v1/models":
            body = json.dumps({"object": "list", "data": [{"id": self.model}]}).encode()
        else:
            body = b""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def impostor(port: int, model: str) -> Iterator[list[str]]:
    """A stranger's HTTP server on 127.0.0.1:``port`` that says it is our model; yields
    the paths it was asked for."""
    hits: list[str] = []
    handler = type("Handler", (_Impostor,), {"model": model, "hits": hits})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hits
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


async def test_port_in_use_before_launch_and_the_fix_starts(
    real_vllm: ProvisionedVllm, supervisors: SupervisorFactory
) -> None:
    """The fixed server (the known-good flags on the next port) is kept for the loop's
    tests (test_realvllm_loop.py), whose first test reads this start's events."""
    sup, rec = supervisors(grace_s=POOL_GRACE_S)
    port = free_port_pair()  # the fix proposes port + 1: keep it free
    flags = good_flags(real_vllm, port=port)
    with impostor(port, flags.model):
        await sup.start(flags)
        # Refused before launch: nothing started, nothing to mistake for readiness.
        assert sup.state is ServerState.FAILED
        (failed,) = rec.lifecycle()
        assert isinstance(failed, Failed)
        assert sup.pid is None and failed.exit_code is None
        d = failed.diagnosis
        assert d.kind == "port_in_use" and d.facts["port"] == port
        assert f"pid {os.getpid()}" in d.facts.get("holder", "")
        fix = _first_fix(d)
        assert fix == {"port": port + 1}

        await _fix_starts(sup, rec, flags.replace(**fix))
        assert sup.base_url.endswith(f":{port + 1}")
    supervisors.keep(sup, rec)


async def test_port_taken_after_launch_is_never_mistaken_for_ready(
    real_vllm: ProvisionedVllm, supervisors: SupervisorFactory
) -> None:
    """A stranger grabs the port after our pre-launch check: its /health says 200 and its
    /v1/models lists our model, yet the supervisor must not call it ready; vLLM then dies
    on the bind and the failure is diagnosed."""
    sup, rec = supervisors()
    port = free_port()
    flags = good_flags(real_vllm, port=port)
    await sup.start(flags)
    assert rec.of(Launched)
    with impostor(port, flags.model) as hits:
        # vLLM binds ~10 s after launch (its imports); the impostor is there long before.
        state = await settle(sup)
        assert "/health" in hits, "the supervisor never probed: the test proves nothing"
    assert state == "failed", f"expected a failed start, got {state}{log_tail(sup)}"
    assert not rec.of(Ready)
    (failed,) = rec.of(Failed)
    d = failed.diagnosis
    assert d.kind == "port_in_use", d
    assert d.facts["port"] == port
    assert "Address already in use" in d.evidence
    assert failed.exit_code == 1
