"""Pre-flight runs off the event loop, and a broken estimator never breaks the form."""

from __future__ import annotations

import threading

from tui.domain.flags.serve import ServeFlags
from tui.domain.preflight import KvEstimate
from tui.session.preflight import CHUNKED_PREFILL_OFF, Preflight

FLAGS = ServeFlags(model="m")


async def test_the_estimator_runs_in_a_worker_thread_not_on_the_loop() -> None:
    loop_thread = threading.get_ident()
    ran_on: list[int] = []

    def estimator(flags: ServeFlags) -> KvEstimate | None:
        ran_on.append(threading.get_ident())
        return None

    preflight = Preflight(estimator)
    assert await preflight.check(FLAGS) == []
    assert await preflight.estimate(FLAGS) is None
    assert len(ran_on) == 2 and loop_thread not in ran_on


async def test_an_estimator_that_raises_becomes_a_warning_and_never_blocks_a_launch() -> None:
    def estimator(flags: ServeFlags) -> KvEstimate | None:
        raise ZeroDivisionError("division by zero")

    preflight = Preflight(estimator)
    assert await preflight.check(FLAGS) == [
        "pre-flight check failed: ZeroDivisionError: division by zero"
    ]
    assert await preflight.estimate(FLAGS) is None  # the launch goes on without it


async def test_chunked_prefill_off_is_flagged_and_the_flag_list_loads_in_the_background() -> None:
    def broken() -> object:
        raise RuntimeError("vllm not importable\nTraceback ...")

    preflight = Preflight(cli=broken)  # type: ignore[arg-type]
    preflight.load_cli()
    assert await preflight.wait_cli() is None
    assert preflight.vllm_cli_error == "RuntimeError: vllm not importable Traceback ..."
    warnings = await preflight.check(FLAGS.replace(enable_chunked_prefill=False))
    assert warnings == [CHUNKED_PREFILL_OFF]
