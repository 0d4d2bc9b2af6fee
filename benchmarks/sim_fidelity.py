"""How close the twin is to the real server it was calibrated on (issue 20, item 3).

    python benchmarks/sim_fidelity.py           # calibrate, then 8 held-out configurations
    python benchmarks/sim_fidelity.py --quick   # 4 held-out configurations (2 restarts)

Calibrates a profile on the real CPU build of vLLM (``vtc setup-cpu-vllm``'s tiny Llama,
``--enforce-eager --kv-cache-memory-bytes 64M``, in dev mode for ``/reset_prefix_cache``)
with ``vtc calibrate``'s own procedure, then runs a held-out set of configurations
(``tui.twin.fidelity.held_out``: ``max_num_seqs``, ``max_num_batched_tokens``, chunked
prefill off, prefix caching off and on with a shared prefix, ``max_model_len`` with a small
KV cache, a Poisson rate, new prompt and output lengths and concurrencies) on the real
server (twice each, a cold prefix cache each time) and on the twin (predicted before the
real run). Printed: each case's real and predicted figures, per metric the median and
worst absolute percentage error, the real server's own repeat-to-repeat spread, the load
average, and last::

    twin error: throughput M% (worst W%), e2el M% (worst W%), ttft M% (worst W%);
    real repeat spread S%

(one line when printed)
(ttft and e2el: their means; p90 TTFT, TPOT and ITL are in the table). The machine this
runs on is shared: the real server on CPU is noisy, which is why its repeat spread is
measured in the same run. Exit 2 when the real vLLM is not provisioned.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from tui.domain.calibration import design  # noqa: E402
from tui.domain.flags.serve import ServeFlags  # noqa: E402
from tui.domain.profile import Profile  # noqa: E402
from tui.domain.results import BenchResult  # noqa: E402
from tui.domain.workload import LoadSpec  # noqa: E402
from tui.modes.calibrate import launched  # noqa: E402
from tui.server.provision import find_provisioned  # noqa: E402
from tui.twin.calibrate import Calibration  # noqa: E402
from tui.twin.fidelity import (  # noqa: E402
    METRICS,
    CaseResult,
    HeldOut,
    real_side,
    summarize,
    twin_side,
)
from tui.twin.service import saved_errors  # noqa: E402
from tui.twin.validation import calibrate as calibrate_fit  # noqa: E402

SHORT = {
    "output_throughput": "tok/s",
    "mean_ttft_ms": "ttft",
    "p90_ttft_ms": "p90ttft",
    "mean_tpot_ms": "tpot",
    "mean_itl_ms": "itl",
    "mean_e2el_ms": "e2el",
}


def _loadavg() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (5 min {five:.2f}) on {os.cpu_count()} cores"


def _fmt(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:8.1f}"


def _print_case(r: CaseResult) -> None:
    print(f"  {r.case.name}:")
    if r.real_failure or r.twin_failure:
        print(f"    real: {r.real_failure or 'started'}; twin: {r.twin_failure or 'starts'}")
    for key in METRICS:
        real = r.real_value(key)
        twin = r.twin.metric(key) if r.twin else None
        err, spread = r.error(key), r.spread(key)
        print(
            f"    {SHORT[key]:8} real {_fmt(real)}  twin {_fmt(twin)}  error {_fmt(err)}%  "
            f"real spread {_fmt(spread)}%"
        )
    sys.stdout.flush()


async def _server_cases(
    vllm: str,
    flags: ServeFlags,
    cases: list[HeldOut],
    profile: Profile | None,
    data_dir: Path,
    repeats: int,
    calibrate: Calibration | None = None,
) -> tuple[Profile | None, list[CaseResult]]:
    results = []
    async with launched(vllm, flags, data_dir, startup_timeout_s=600) as target:
        if calibrate is not None:
            calibrate.target = target
            t0 = time.monotonic()
            profile = await calibrate.run(lambda p: print(f"\r  {p.line()}", end="", flush=True))
            print(f"\n  calibrated in {time.monotonic() - t0:.0f} s: {saved_errors(profile)}")
            print(f"  coefficients: {profile.coefficients}")
        assert profile is not None
        model = flags.model
        for case in cases:
            r = CaseResult(case)
            twin_side(profile, profile.flags, case, r)  # predicted before the real run
            await real_side(target.base_url, model, case, r, target.client, repeats)
            _print_case(r)
            results.append(r)
    return profile, results


async def main_async(args: argparse.Namespace) -> int:
    found = find_provisioned()
    if found is None:
        print("real vLLM is not provisioned: run `vtc setup-cpu-vllm` first", file=sys.stderr)
        return 2
    from tui.twin.fidelity import held_out

    cases = held_out(quick=args.quick)
    data_dir = Path(tempfile.mkdtemp(prefix="vtc-fidelity-"))
    os.environ["VTC_DATA_DIR"] = str(data_dir)
    base = ServeFlags(
        model=str(found.model),
        enforce_eager=True,
        kv_cache_memory_bytes=64 * 2**20,
        max_model_len=4096,
    )
    print(f"sim_fidelity: real vLLM {found.version} (CPU build), {found.model.name}; {_loadavg()}")
    calibrate = Calibration(
        name="fidelity",
        target=None,  # type: ignore[arg-type]  # set once launched
        loads=design(4096, args.scale, passes=args.passes),
        data_dir=data_dir,
        budget_s=args.budget,
    )
    groups: dict[tuple[tuple[str, Any], ...], list[HeldOut]] = {}
    for case in cases:
        groups.setdefault(case.overrides, []).append(case)
    results: list[CaseResult] = []
    profile: Profile | None = None
    t0 = time.monotonic()
    for overrides, group in groups.items():
        print(f"server: {', '.join(f'{k}={v}' for k, v in overrides) or 'calibrated flags'}")
        flags = base.model_copy(update=dict(overrides))
        profile, done = await _server_cases(
            str(found.vllm),
            flags,
            group,
            profile,
            data_dir,
            args.repeats,
            calibrate if profile is None else None,
        )
        results.extend(done)
        print(f"  ({_loadavg()})")
    if args.save:
        _save(args.save, profile, results)
    summary = summarize(results, profile)
    print(f"per metric over {len(results)} held-out cases (median / worst absolute % error):")
    for key in METRICS:
        if key in summary.median:
            print(f"  {SHORT[key]:8} {summary.median[key]:6.1f}% / {summary.worst[key]:6.1f}%")
    print(f"took {time.monotonic() - t0:.0f} s; {_loadavg()}")
    print(summary.last_line())
    return 0


def _save(path: Path, profile: Profile | None, results: list[CaseResult]) -> None:
    """The profile and every real measurement, for refitting the twin offline (--replay)."""
    data = {
        "profile": profile.model_dump(mode="json") if profile else None,
        "cases": [
            {
                "name": r.case.name,
                "overrides": [list(o) for o in r.case.overrides],
                "load": r.case.load.model_dump(mode="json"),
                "real": [b.model_dump(mode="json") for b in r.real],
            }
            for r in results
        ],
    }
    path.write_text(json.dumps(data))
    print(f"saved the measurements to {path}")


def replay(path: Path) -> int:
    """Refit the saved profile on its calibration samples and predict the saved cases."""
    data = json.loads(path.read_text())
    profile = Profile.model_validate(data["profile"])
    refit = calibrate_fit(profile, profile.samples)
    print(
        f"refit: {refit.coefficients}; serial front end {refit.serial_frontend}; "
        f"{saved_errors(refit)}"
    )
    results = []
    for c in data["cases"]:
        case = HeldOut(
            c["name"], tuple(tuple(o) for o in c["overrides"]), LoadSpec.model_validate(c["load"])
        )
        r = CaseResult(case, real=[BenchResult.model_validate(b) for b in c["real"]])
        twin_side(refit, refit.flags, case, r)
        _print_case(r)
        results.append(r)
    print(summarize(results, refit).last_line())
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 held-out cases, 2 restarts")
    parser.add_argument("--repeats", type=int, default=2, help="real runs per case (default 2)")
    parser.add_argument("--budget", type=float, default=300.0, help="calibration budget, s")
    parser.add_argument("--scale", type=float, default=1.0, help="calibration loads, x this")
    parser.add_argument("--passes", type=int, default=2, help="calibration passes (default 2)")
    parser.add_argument("--save", type=Path, help="write the profile and real results (JSON)")
    parser.add_argument("--replay", type=Path, help="refit and predict a --save file, offline")
    args = parser.parse_args()
    if args.replay:
        return replay(args.replay)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
