"""The tuning loop through the services against the real vLLM CPU build, on ONE server.

Start -> ready (stages, vLLM's own KV numbers) -> scrape /metrics -> run load -> counters
match the load -> cancel a load -> a second start on the same port is refused -> stop while
streams are open, with no process left. The tests share one server (module scope, one
event loop) and run in file order; each is valid alone too (it measures deltas), and only
the last one stops the server. The server is the one the port fix of
test_realvllm_failures.py started with these flags and kept, when that test ran first.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest
import pytest_asyncio
from fakes.supervisor import Supervisor
from realvllm_support import (
    HANG_S,
    KV_64M,
    POOL_GRACE_S,
    EventRecorder,
    ServerPool,
    assert_nothing_left,
    good_flags,
    kv_bytes_per_token,
    local_client,
    log_tail,
    make_supervisor,
    metrics_source,
    sample_until,
    served_max_model_len,
    settle,
    tree,
    wait_gone,
    wait_streaming,
)

from tui.domain.events import (
    Answered,
    Exited,
    Failed,
    KvCacheReported,
    Launched,
    Ready,
    ServerState,
    Stage,
    StageReached,
    Unanswered,
)
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import BenchResult
from tui.domain.telemetry import SourceStatus
from tui.domain.workload import LoadProgress, LoadSpec
from tui.load.runner import LoadRunner
from tui.server.provision import ProvisionedVllm
from tui.telemetry.host import process_tree_usage
from tui.telemetry.vllm_metrics import VllmMetricsSource

# The session's event loop: the server may be one an earlier test started and kept.
# timed: rates against the server's counters, alone (tests/suite_tiers.py)
pytestmark = [
    pytest.mark.realvllm,
    pytest.mark.timed,
    pytest.mark.asyncio(loop_scope="session"),
]

GRACE_S = POOL_GRACE_S  # the last test stops under load: SIGKILL comes after this
SMALL_LOAD = LoadSpec(input_len=64, output_len=32, num_prompts=16, max_concurrency=4, seed=7)
_KV_LINE = re.compile(r"CPU KV cache size: ([\d,]+) tokens")


@dataclass
class Served:
    """The shared server: its supervisor, what it reported, and every process seen in it."""

    sup: Supervisor
    recorder: EventRecorder
    flags: ServeFlags
    seen: list[psutil.Process] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return self.sup.base_url

    def remember_tree(self) -> None:
        known = {(p.pid, p.create_time()) for p in self.seen}
        for proc in tree(self.sup.pid or 0):
            try:
                key = (proc.pid, proc.create_time())
            except psutil.NoSuchProcess:
                continue
            if key not in known:
                self.seen.append(proc)
                known.add(key)

    def metrics(self) -> AbstractAsyncContextManager[VllmMetricsSource]:
        return metrics_source(self.base_url)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def served(
    real_vllm: ProvisionedVllm,
    tmp_path_factory: pytest.TempPathFactory,
    server_pool: ServerPool,
) -> AsyncIterator[Served]:
    """One good server for the whole module, started through the Supervisor: the one
    test_realvllm_failures.py's port fix started and kept, else one started here."""
    kept = server_pool.take(good_flags(real_vllm), GRACE_S)
    if kept is not None:
        sup, recorder, flags = kept.sup, kept.recorder, kept.flags
    else:
        recorder = EventRecorder()
        log_dir: Path = tmp_path_factory.mktemp("loop-logs")
        sup = make_supervisor(real_vllm, log_dir, recorder, grace_s=GRACE_S)
        flags = good_flags(real_vllm)
    try:
        if kept is None:
            await sup.start(flags)
            state = await settle(sup)
            assert state == "ready", f"good flags did not start: {state}{log_tail(sup)}"
        served = Served(sup, recorder, flags)
        served.remember_tree()
        yield served
    finally:
        await sup.aclose()


async def test_start_reports_stages_kv_tokens_and_ready(
    served: Served, real_vllm: ProvisionedVllm
) -> None:
    sup, rec = served.sup, served.recorder
    # The start's lifecycle: what the health watch reports once it serves (a /health that a
    # busy machine answered late, then again) is not part of it.
    life = [e for e in rec.lifecycle() if not isinstance(e, Answered | Unanswered)]
    assert isinstance(life[0], Launched)
    assert life[0].pid == sup.pid
    assert life[0].argv[:3] == (str(real_vllm.vllm), "serve", str(real_vllm.model))
    assert not rec.of(Failed) and not rec.of(Exited)
    assert sup.state is ServerState.READY

    # Stages: in the documented order, with non-decreasing times, the CPU startup's stages.
    reached = rec.of(StageReached)
    order = list(Stage)
    assert [order.index(e.stage) for e in reached] == sorted(order.index(e.stage) for e in reached)
    assert [e.elapsed for e in reached] == sorted(e.elapsed for e in reached)
    assert {e.stage for e in reached} >= {
        Stage.LAUNCHING,
        Stage.LOADING_WEIGHTS,
        Stage.PROFILING,
        Stage.KV_CACHE,
        Stage.API_UP,
        Stage.READY,
    }
    assert reached[0].stage is Stage.LAUNCHING and reached[-1].stage is Stage.READY

    # The KV report carries vLLM's own numbers: 64 MiB / (2 x 2 layers x 2 KV heads x 32 x
    # 2 bytes = 512 B per token) = 131,072 tokens; 2,048 tokens per request -> 64x.
    (kv,) = rec.of(KvCacheReported)
    logged = [m for line in sup.log_lines.lines() if (m := _KV_LINE.search(line))]
    assert len(logged) == 1, "vLLM logs its KV cache size exactly once"
    assert kv.device == "CPU"
    assert kv.tokens == int(logged[0].group(1).replace(",", ""))
    assert kv.tokens == KV_64M // kv_bytes_per_token(real_vllm.model) == 131_072
    assert kv.max_model_len == served.flags.max_model_len == 2048
    assert kv.max_concurrency == pytest.approx(kv.tokens / 2048, abs=0.01)

    (ready,) = rec.of(Ready)
    assert life[-1] == ready, "Ready is the last lifecycle event of a good start"
    assert ready.kv_cache_tokens == kv.tokens
    assert ready.max_concurrency == kv.max_concurrency
    assert rec.time_of(KvCacheReported) <= rec.time_of(Ready)  # type: ignore[operator]

    # The server we declared ready really serves the model we asked for.
    assert await served_max_model_len(served.base_url) == 2048
    assert sup.log_path is not None and sup.log_path.is_file()
    assert "KV cache size" in sup.log_path.read_text()


async def test_idle_metrics_and_process_tree(served: Served) -> None:
    async with served.metrics() as source:
        idle = await source.sample()
    assert idle.status is SourceStatus.OK, idle.message
    assert idle.kv_cache_usage == 0.0
    assert idle.num_running == 0 and idle.num_waiting == 0
    assert idle.block_size == 128  # CPU default (platforms/cpu.py:292-293)
    (kv,) = served.recorder.of(KvCacheReported)
    assert idle.num_gpu_blocks is not None
    assert idle.num_gpu_blocks * idle.block_size == kv.tokens
    # A first sample has no rates (they need two scrapes).
    assert idle.generation_tokens_per_s is None

    # The tree: API server -> resource_tracker, EngineCore -> Worker.
    assert served.sup.pid is not None
    rss, count = process_tree_usage(served.sup.pid)
    now = tree(served.sup.pid)
    assert count is not None and count >= 3 and count == len(now)
    assert rss is not None and rss > 100 * 2**20  # a few hundred MiB at least
    served.remember_tree()


async def test_load_result_matches_server_counters(served: Served) -> None:
    spec = SMALL_LOAD
    progress: list[LoadProgress] = []
    # Two sources: `probe` waits for the server's counters, so that `source` computes its
    # rates over exactly before -> after.
    async with served.metrics() as source, served.metrics() as probe:
        before = await sample_until(source, lambda m: True, "a scrape before the load")
        result = await asyncio.wait_for(
            LoadRunner().run(
                spec,
                base_url=served.base_url,
                model=served.flags.model,
                on_progress=progress.append,
            ),
            timeout=HANG_S,
        )
        assert before.generation_tokens_total is not None
        assert before.prompt_tokens_total is not None
        assert before.requests_success_total is not None
        expected_gen = before.generation_tokens_total + spec.num_prompts * spec.output_len
        expected_ok = before.requests_success_total + spec.num_prompts
        # vLLM counts a request as it finishes it, a moment after the client saw its last
        # token: wait until the server says it is done (its counters, nothing running).
        await sample_until(
            probe,
            lambda m: (
                (m.generation_tokens_total or 0) >= expected_gen
                and (m.requests_success_total or 0) >= expected_ok
                and m.num_running == 0
            ),
            "the load's tokens and requests counted, nothing running",
        )
        after = await sample_until(source, lambda m: True, "a scrape after the load")

    # What the client measured.
    assert isinstance(result, BenchResult)
    assert result.completed == spec.num_prompts and result.failed == 0, result.errors
    assert result.total_output_tokens == spec.num_prompts * spec.output_len == 512
    assert result.total_input_tokens > 0
    assert result.max_concurrency == 4
    assert result.duration > 0
    assert result.request_throughput == pytest.approx(result.completed / result.duration)
    for key in ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "mean_itl_ms"):
        assert result.stats[key] > 0, key
    assert result.stats["p99_ttft_ms"] >= result.stats["median_ttft_ms"]
    assert progress and progress[-1].done == 16 and progress[-1].failed == 0
    assert progress[-1].in_flight == 0 and progress[-1].total == 16

    # What the server counted for the same run: exactly the same tokens and requests.
    assert after.status is SourceStatus.OK
    assert after.generation_tokens_total is not None and after.prompt_tokens_total is not None
    gen = after.generation_tokens_total - before.generation_tokens_total
    prompt = after.prompt_tokens_total - before.prompt_tokens_total
    assert gen == result.total_output_tokens == 512
    assert prompt == result.total_input_tokens
    assert after.requests_success_total == before.requests_success_total + 16
    dt = after.t - before.t
    assert after.generation_tokens_per_s == pytest.approx(512 / dt)
    assert after.prompt_tokens_per_s == pytest.approx(prompt / dt)
    assert after.num_running == 0
    served.remember_tree()


async def test_cancelled_load_frees_the_server(served: Served) -> None:
    """Cancelling a load closes its streams at once: vLLM aborts them and keeps serving."""
    # Each request asks for 2,000 tokens (vLLM caps it at max_model_len minus the prompt).
    # 64 prompts through 8 slots: however fast the tiny model finishes a wave, most requests
    # are still waiting for a slot when the cancel comes.
    long = LoadSpec(input_len=32, output_len=2000, num_prompts=64, max_concurrency=8, seed=3)
    runner = LoadRunner(progress_interval_s=0.25)
    progress: list[LoadProgress] = []
    async with served.metrics() as source:
        before = await sample_until(source, lambda m: True, "a scrape before the load")
        assert before.generation_tokens_total is not None
        task = asyncio.create_task(
            runner.run(
                long,
                base_url=served.base_url,
                model=served.flags.model,
                on_progress=progress.append,
            )
        )
        await wait_streaming(progress, 8, task, timeout_s=HANG_S)
        partial = await asyncio.wait_for(runner.cancel(), timeout=HANG_S)
        assert task.done()
        assert partial is not None and partial == task.result()
        assert partial.cancelled is True
        not_sent = partial.not_sent
        # The streams open at the cancel fail as "cancelled"; the ones never sent are not
        # measured; nothing is lost between the three.
        assert not_sent > 0, partial
        assert 1 <= partial.failed <= 8, partial
        assert partial.completed + partial.failed + not_sent == 64
        assert set(partial.errors) == {"cancelled"}
        # The server ends up idle with every KV block free, and the 8 requests that were
        # never sent never reached it (at most 2,000 tokens each for those sent). Whether
        # vLLM aborted the 8 open streams or had already generated them depends on timing
        # here (the engine runs ahead of the streaming); the stop test below shows that
        # the connections were closed.
        idle = await sample_until(
            source,
            lambda m: m.num_running == 0 and m.kv_cache_usage == 0.0,
            "the server idle after the cancel",
        )
        assert idle.num_waiting == 0
        assert idle.generation_tokens_total is not None
        generated = idle.generation_tokens_total - before.generation_tokens_total
        assert 0 < generated <= (64 - not_sent) * 2000, generated
    # ... and still serves.
    again = await asyncio.wait_for(
        LoadRunner().run(
            LoadSpec(input_len=16, output_len=8, num_prompts=4, max_concurrency=4),
            base_url=served.base_url,
            model=served.flags.model,
        ),
        timeout=HANG_S,
    )
    assert again.completed == 4 and again.failed == 0
    assert served.sup.state is ServerState.READY
    assert not served.recorder.of(Failed)


async def test_second_start_on_the_same_port_is_refused(
    served: Served, real_vllm: ProvisionedVllm, tmp_path: Path
) -> None:
    """A live vLLM holds the port: a second supervisor refuses to launch (never 'ready')."""
    rec = EventRecorder()
    other = make_supervisor(real_vllm, tmp_path, rec)
    try:
        await other.start(served.flags)
        assert other.state is ServerState.FAILED
        (failed,) = rec.of(Failed)
        assert rec.lifecycle() == [failed]
        assert other.pid is None
        assert failed.diagnosis.kind == "port_in_use"
        assert failed.diagnosis.facts["port"] == served.flags.port
        assert str(served.sup.pid) in failed.diagnosis.facts.get("holder", "")
        assert failed.diagnosis.fixes[0].set == {"port": served.flags.port + 1}  # type: ignore[operator]
    finally:
        await other.aclose()
    async with local_client() as client:
        assert (await client.get(served.base_url + "/health")).status_code == 200
    assert served.sup.state is ServerState.READY


async def test_stop_with_open_streams_ends_the_whole_tree(served: Served) -> None:
    """Stop while 32 streams are open and the load is NOT cancelled first.

    vllm-cpu-findings.md: with streams in flight, SIGTERM ends the engine but the API
    server may wait forever for its clients; the supervisor must still end the whole tree,
    by SIGKILL of the group after ``grace_s``. (The polite path, load cancelled first, is
    the console's own close in test_realvllm_session.py.)
    """
    sup = served.sup
    pgid = sup.pid
    assert pgid is not None
    # 32 streams of ~1,950 tokens each (max_model_len 2,048 minus the prompt), ignore_eos:
    # over ten seconds of work on two cores.
    # 96 prompts through 32 slots: streams stay open across waves however fast each ends.
    spec = LoadSpec(
        input_len=32, output_len=2000, num_prompts=96, max_concurrency=32, ignore_eos=True
    )
    runner = LoadRunner(progress_interval_s=0.25)
    progress: list[LoadProgress] = []
    load = asyncio.create_task(
        runner.run(
            spec, base_url=served.base_url, model=served.flags.model, on_progress=progress.append
        )
    )
    try:
        flowing = await wait_streaming(progress, 32, load, timeout_s=HANG_S)
        # Let the streams run a moment: stopped in their first few hundred milliseconds,
        # vLLM more often still ends them itself (it aborts the requests on SIGTERM), while
        # later it tends to wait on them forever, which is the case this test is about.
        while progress[-1].elapsed < flowing.elapsed + 1.5 and not load.done():
            await asyncio.sleep(0.05)
        assert not load.done(), "the load ended before the stop: make it longer"
        served.remember_tree()
        assert len(served.seen) >= 3

        t0 = time.monotonic()
        await asyncio.wait_for(sup.stop(), timeout=GRACE_S + 30)
        took = time.monotonic() - t0
        # SIGTERM, grace_s, SIGKILL of the group: a few seconds past the grace, never more.
        assert took < GRACE_S + 5, f"stop took {took:.1f} s"
        report = sup.last_termination
        assert report is not None and report.clean, report
        assert not await wait_gone(served.seen, 30)
        assert_nothing_left(sup, served.seen, pgid)
        assert sup.state is ServerState.STOPPED
        exited = served.recorder.of(Exited)
        assert len(exited) == 1 and exited[0].requested
        assert not served.recorder.of(Failed)
        with pytest.raises(httpx.ConnectError):
            async with local_client() as client:
                await client.get(served.base_url + "/health")

        # The load ends by itself: no stream hangs once the server is gone.
        result = await asyncio.wait_for(load, timeout=HANG_S)
        assert result.completed + result.failed == 96
        if report.escalated:
            # The API server waited on its open streams until SIGKILL of the group.
            assert took >= GRACE_S
            assert sup.exit_code == -9 and exited[0].exit_code == -9
        else:
            # vLLM ended its streams itself on SIGTERM and exited cleanly (its process
            # group may linger a moment past the leader, so no bound on `took` here).
            assert exited[0].exit_code == 0
    finally:
        if not load.done():
            await runner.cancel()
