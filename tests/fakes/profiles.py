"""Twin profiles for tests: a known set of coefficients on a tiny model, and its samples.

:func:`cpu_profile` is a profile of the tiny Llama on a CPU server (KV from an explicit
size); :func:`twin_samples` measures loads on that profile's own twin, so a fit started
elsewhere must find the coefficients it was built with (no real server needed).
"""

from __future__ import annotations

from pathlib import Path

from fakes.tiny_model import write_tiny_model
from tui.domain.flags.serve import ServeFlags
from tui.domain.prediction import ErrorSource
from tui.domain.profile import (
    FitSample,
    MeasuredError,
    MemorySide,
    Profile,
    ProfileIdentity,
    StepCoefficients,
)
from tui.domain.results import BenchResult
from tui.domain.workload import LoadSpec

KNOWN = StepCoefficients(
    b0=0.004, b1=0.00003, b2=0.0003, b3=0.0002, b4=0.004, b5=0.00002, a0=0.003, a1=0.00001
)
"""The coefficients the fake server runs with."""
KV_BYTES = 64 * 2**20


def cpu_profile(
    folder: Path, coefficients: StepCoefficients = KNOWN, name: str = "tiny-cpu"
) -> Profile:
    """A profile of the tiny Llama in ``folder`` (written there) on a CPU server."""
    model = str(write_tiny_model(folder))
    flags = ServeFlags(model=model, kv_cache_memory_bytes=KV_BYTES, enforce_eager=True)
    return Profile(
        name=name,
        identity=ProfileIdentity(
            model=model, device="cpu", device_kind="cpu", vllm_version="0.32.0", dtype="bfloat16"
        ),
        flags=flags,
        coefficients=coefficients,
        memory=MemorySide(
            kv_tokens=131072,
            block_size=128,
            num_blocks=1024,
            kv_bytes=KV_BYTES,
            max_model_len=4096,
            max_num_seqs=128,
            max_num_batched_tokens=2048,
        ),
        fit_error=MeasuredError(median_pct=2.0, worst_pct=6.0, interval_pct=3.0),
        validation=MeasuredError(
            median_pct=3.0, worst_pct=12.0, interval_pct=5.0, source=ErrorSource.VALIDATION
        ),
        frontend_blocks=True,  # a CPU server: the API server shares the engine's cores
    )


DESIGN = (
    LoadSpec(input_len=32, output_len=64, num_prompts=16, max_concurrency=1),
    LoadSpec(input_len=32, output_len=64, num_prompts=24, max_concurrency=8),
    LoadSpec(input_len=768, output_len=8, num_prompts=12, max_concurrency=2),
    LoadSpec(input_len=256, output_len=32, num_prompts=24, max_concurrency=6, prefix_len=256),
)


def twin_samples(
    profile: Profile, loads: tuple[LoadSpec, ...] = DESIGN, *, server: bool = True
) -> list[FitSample]:
    """What ``profile``'s own twin measures for ``loads`` (as a real server's results and,
    with ``server``, its own ``/metrics``: steps and phase times)."""
    from tui.sim.twin import twin_config
    from tui.sim.twin_load import LoadShape, run_twin_load
    from tui.twin.fit import server_phases
    from tui.twin.predict import predict

    samples = []
    for i, load in enumerate(loads):
        run = predict(profile, profile.flags, load)
        assert run.starts and run.completed is not None
        n = run.completed
        result = BenchResult(
            completed=n,
            total_input_tokens=(load.input_len + load.prefix_len) * n,
            total_output_tokens=load.output_len * n,
            output_throughput=run.metric("output_throughput"),
            stats={
                key: run.metric(key)
                for key in (
                    "mean_ttft_ms",
                    "mean_tpot_ms",
                    "mean_e2el_ms",
                    "p99_ttft_ms",
                    "p99_itl_ms",
                    "p99_e2el_ms",
                )
            },
        )
        side = None
        if server:
            config = twin_config(profile, profile.flags).config
            assert config is not None
            trace = run_twin_load(
                config, profile.coefficients, LoadShape.of(load), blocking=profile.frontend_blocks
            )
            side = server_phases(trace)
        samples.append(
            FitSample(
                name=f"load{i}",
                flags=profile.flags,
                load=load,
                result=result,
                server_steps=side.steps if side else None,
                server=side,
            )
        )
    return samples
