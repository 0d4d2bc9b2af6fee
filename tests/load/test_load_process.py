"""The console's load in its own process (issue 23): the same engine as ``vtc bench``,
a typed result over a pipe, cancellation, secrets, and no worker outliving its console."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest
from fakes.load import FakeVllm

from tui.domain.workload import LoadProgress, LoadSpec
from tui.load.errors import LoadError
from tui.load.job import ErrorLine, LoadJob, ProgressLine, ResultLine, decode, encode
from tui.load.process import LoadProcessError, ProcessLoadRunner
from tui.load.runner import CANCELLED_ERROR, LoadRunner

SPEC = LoadSpec(input_len=16, output_len=5, num_prompts=8, max_concurrency=4)


async def until(fake: FakeVllm, predicate: object) -> None:
    """Wait (woken by the fake's own notifications) until ``predicate()`` holds."""
    assert await asyncio.to_thread(fake.wait_until, predicate)  # type: ignore[arg-type]


async def test_worker_measures_what_the_in_process_runner_measures(fake_vllm: FakeVllm) -> None:
    seen: list[LoadProgress] = []
    runner = ProcessLoadRunner(progress_interval_s=0.05)
    result = await runner.run(
        SPEC, base_url=fake_vllm.base_url, model="fake", on_progress=seen.append
    )
    same = await LoadRunner().run(SPEC, base_url=fake_vllm.base_url, model="fake")
    assert result.client == "vtc-worker" and same.client == "in-loop"
    for key in ("completed", "failed", "total_input_tokens", "total_output_tokens", "num_prompts"):
        assert getattr(result, key) == getattr(same, key), key
    assert (result.completed, result.cancelled) == (8, False)
    assert set(result.stats) == set(same.stats)
    assert seen and seen[-1].done == 8  # the worker's final progress came over the pipe
    assert not runner.running and runner.pid is None


async def test_goodput_travels_with_the_request(fake_vllm: FakeVllm) -> None:
    runner = ProcessLoadRunner()
    with_slos = await runner.run(
        SPEC, base_url=fake_vllm.base_url, model="fake", goodput={"e2el": 60_000}
    )
    without = await runner.run(SPEC, base_url=fake_vllm.base_url, model="fake")
    assert with_slos.request_goodput is not None and with_slos.request_goodput > 0
    assert without.request_goodput is None  # nothing stayed behind on the runner


async def test_the_api_key_goes_over_stdin_never_argv(fake_vllm: FakeVllm) -> None:
    runner = ProcessLoadRunner(api_key="sk-secret-123", progress_interval_s=0.02)
    argvs: list[list[str]] = []

    def spy(progress: LoadProgress) -> None:
        pid = runner.pid
        if pid is not None:
            with contextlib.suppress(psutil.Error):
                argvs.append(psutil.Process(pid).cmdline())

    fake_vllm.chunk_delay_s = 0.02
    await runner.run(SPEC, base_url=fake_vllm.base_url, model="fake", on_progress=spy)
    assert {h.get("authorization") for h in fake_vllm.headers} == {"Bearer sk-secret-123"}
    assert argvs and all("sk-secret-123" not in " ".join(argv) for argv in argvs)
    assert "sk-secret" not in repr(runner)
    job = LoadJob(spec=SPEC, base_url="http://x", model="m", api_key="sk-secret-123")
    assert "sk-secret" not in repr(job)


async def test_cancel_keeps_the_partial_result(fake_vllm: FakeVllm) -> None:
    fake_vllm.chunk_delay_s = 0.2
    runner = ProcessLoadRunner()
    spec = LoadSpec(input_len=16, output_len=200, num_prompts=8, max_concurrency=4)
    task = asyncio.create_task(runner.run(spec, base_url=fake_vllm.base_url, model="fake"))
    await until(fake_vllm, lambda: fake_vllm.open_streams == 4)
    await runner.cancel()
    result = await task
    assert result.cancelled and result.completed == 0
    assert result.failed == 4 and result.not_sent == 4
    assert set(result.errors) == {CANCELLED_ERROR}
    await until(fake_vllm, lambda: fake_vllm.open_streams == 0)  # the streams were cut


async def test_a_worker_deaf_to_cancel_is_killed_with_its_group(tmp_path: Path) -> None:
    script = tmp_path / "deaf.py"
    script.write_text(
        textwrap.dedent(
            """
            import signal, subprocess, sys, time
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            print(child.pid, file=sys.stderr, flush=True)
            time.sleep(600)
            """
        )
    )
    runner = ProcessLoadRunner(cancel_grace_s=0.5)
    runner.argv = lambda: [sys.executable, str(script)]  # type: ignore[method-assign]
    task = asyncio.create_task(runner.run(SPEC, base_url="http://127.0.0.1:9", model="m"))
    while runner.pid is None:
        await asyncio.sleep(0.01)
    pid = runner.pid
    group = [p.pid for p in psutil.Process(pid).children()]
    await runner.cancel()
    with pytest.raises(LoadProcessError, match="no result"):
        await task
    for gone in [pid, *group]:
        assert not psutil.pid_exists(gone) or psutil.Process(gone).status() == "zombie"


async def test_cancelling_the_awaiting_task_kills_the_worker(fake_vllm: FakeVllm) -> None:
    fake_vllm.chunk_delay_s = 0.2
    runner = ProcessLoadRunner()
    spec = LoadSpec(input_len=16, output_len=200, num_prompts=8, max_concurrency=4)
    task = asyncio.create_task(runner.run(spec, base_url=fake_vllm.base_url, model="fake"))
    await until(fake_vllm, lambda: fake_vllm.open_streams == 4)
    pid = runner.pid
    assert pid is not None
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not psutil.pid_exists(pid)
    await until(fake_vllm, lambda: fake_vllm.open_streams == 0)


def test_the_worker_ends_when_its_console_dies(fake_vllm: FakeVllm, tmp_path: Path) -> None:
    """A console killed with SIGKILL mid-load: its worker cuts the streams and exits."""
    console = tmp_path / "console.py"
    console.write_text(
        textwrap.dedent(
            f"""
            import asyncio, sys
            from tui.domain.workload import LoadSpec
            from tui.load.process import ProcessLoadRunner

            async def main():
                runner = ProcessLoadRunner()
                spec = LoadSpec(input_len=16, output_len=500, num_prompts=4, max_concurrency=4)
                url = {fake_vllm.base_url!r}
                task = asyncio.create_task(runner.run(spec, base_url=url, model="f"))
                while runner.pid is None:
                    await asyncio.sleep(0.01)
                print(runner.pid, flush=True)
                await task

            asyncio.run(main())
            """
        )
    )
    fake_vllm.chunk_delay_s = 0.2
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, str(console)], stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        worker = int(proc.stdout.readline())
        assert fake_vllm.wait_until(lambda: fake_vllm.open_streams == 4)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert fake_vllm.wait_until(lambda: fake_vllm.open_streams == 0)
        assert psutil.wait_procs([psutil.Process(worker)], timeout=60)[1] == []
    except psutil.NoSuchProcess:
        pass  # already gone: what was asked
    finally:
        proc.kill()
        proc.wait()


async def test_a_failing_load_is_one_line() -> None:
    runner = ProcessLoadRunner()
    with pytest.raises(LoadError, match="must start with http"):
        await runner.run(SPEC, base_url="ftp://nowhere", model="m")
    assert not runner.running


def test_every_line_reads_back_typed() -> None:
    line = ErrorLine(message="no", hint="try")
    assert decode(encode(line)) == line
    progress = ProgressLine(progress=LoadProgress(1.0, 2, 0, 1, 8, float("inf")))
    assert decode(encode(progress)).progress.output_tokens_per_s == float("inf")  # type: ignore[union-attr]
    with pytest.raises(ValueError):
        decode(b'{"kind": "result", "result": {"completed": "many"}}\n')
    assert isinstance(decode(b'{"kind": "result", "result": {}}\n'), ResultLine)


async def test_a_cancel_before_the_worker_is_up_still_cancels(fake_vllm: FakeVllm) -> None:
    fake_vllm.chunk_delay_s = 0.2
    runner = ProcessLoadRunner()
    spec = LoadSpec(input_len=16, output_len=200, num_prompts=8, max_concurrency=4)
    task = asyncio.create_task(runner.run(spec, base_url=fake_vllm.base_url, model="fake"))
    await asyncio.sleep(0)  # the run has begun: its process is being started
    assert runner.running
    await runner.cancel()
    result = await task
    assert result.cancelled and result.completed == 0
    assert fake_vllm.finished_streams == 0


async def test_the_in_process_runner_takes_a_cancel_while_preparing(fake_vllm: FakeVllm) -> None:
    runner = LoadRunner()
    task = asyncio.create_task(runner.run(SPEC, base_url=fake_vllm.base_url, model="fake"))
    await asyncio.sleep(0)
    runner.cancel_nowait()  # before its streams exist: they never start
    result = await task
    assert result.cancelled and result.completed == 0 and result.not_sent == SPEC.num_prompts
