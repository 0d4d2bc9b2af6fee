"""A process killed by the host: the kernel's OOM killer, an illegal instruction, a crash.

No Python exception names these: the process just ends with a signal, and what is left is
the parent's note or the shell's. Texts:

- vLLM V0 (``executor/multiproc_worker_utils.py``, 0.5-0.10): ``Worker VllmWorkerProcess pid
  N died, exit code: -9``; V1 (``v1/executor/multiproc_executor.py``): ``Worker proc
  VllmWorker-0 died unexpectedly, shutting down executor.``, with ``(exit code: -9)`` where the
  monitor logs it (vLLM PR 38641); the CPU build's worker in 0.32 ``died unexpectedly`` with
  exit ``-4`` on the first forward of a one-word prompt on AVX-512/AMX hosts (vtc's CI);
- the API server's wrapper (0.9+): ``Engine core initialization failed. See root cause
  above. Failed core proc(s): {'EngineCore_DP0': -9}``;
- the shell: a bare ``Killed`` (bash's report of SIGKILL; issue MU-GOT 17 right after ``# GPU
  blocks``), ``Illegal instruction (core dumped)``, ``Segmentation fault``, ``Bus error``;
- Ray: ``killed by the OOM killer`` / ``SIGKILL by OOM killer`` / ``killed due to memory
  pressure (OOM)`` (vLLM issue 586), Docker's ``exited with code 137``, Kubernetes' ``OOMKilled``.

Signal 9 from the host is the OOM killer: host RAM, not GPU memory, ran out (CPU offload and
swap space are pinned host RAM; the CPU backend's KV cache is host RAM). Signal 4 (SIGILL) is a
kernel built for instructions this CPU runs differently: no flag helps. 7 (SIGBUS) is a
container's small ``/dev/shm``; 11 a crash in native code.
"""

from __future__ import annotations

import math
import re
import signal
from typing import Any, Final

from tui.domain.diagnosis import Diagnosis, Fix
from tui.server.diagnose.common import floor2, make, util_change, util_setting
from tui.server.diagnose.reading import LogView, loose, tolerant

HOST_SIGNALS: Final = (9, 4, 7, 11)
_DIED: Final = tolerant(
    loose(
        r"(?:Worker|proc|process|Engine core|EngineCore)\S{0,40} (?:pid \d+ )?died"
        r"(?: unexpectedly)?\S{0,3} ?\(?exit ?code:? (?P<code>-?\d+)"
    ),
    "died",
)
# A signal named by number elsewhere: multiprocessing's repr ("<SpawnProcess name='EngineCore_0'
# ... exitcode=-SIGKILL>", "exitcode=-9"), torch elastic ("Signal 9 (SIGKILL) received by PID"),
# systemd ("Main process exited, code=killed, status=9/KILL").
_SIGNAL_NAMED: Final = tolerant(
    loose(
        r"exitcode=-(?:(?P<num>\d+)|SIG(?P<name>KILL|ILL|BUS|SEGV))\b|"
        r"Signal (?P<num2>\d+) \(SIG\w+\) received by PID|"
        r"code=killed, status=(?P<num3>\d+)"
    ),
    "exitcode=-",
    "received by PID",
    "code=killed",
)
_SIGNAL_NAMES: Final = {"KILL": 9, "ILL": 4, "BUS": 7, "SEGV": 11}
# 0.9+: the API server's wrapper names each dead core process with its exit code.
_CORE_PROCS: Final = tolerant(
    loose(r"Failed core proc\(?s?\)?: \{?[^{}]{0,200}?: ?(?P<code>-\d+)"), "Failed core proc"
)
# The shell's report, or Python's faulthandler ("Fatal Python error: Segmentation fault").
_SHELL: Final = re.compile(
    r"^\s*(?:(?:[\w/.-]+: line \d+: {0,2}\d+ +|\d+ +)(?P<job>Killed|Illegal instruction|"
    r"Segmentation fault|Bus error)\b.*|(?:Fatal Python error: )?(?P<what>Killed|Illegal "
    r"instruction|Segmentation fault|Bus error)(?: +\(core dumped\))?\s*)$"
)
_OOM_KILLER: Final = tolerant(
    r"killed by the OOM killer|SIGKILL by OOM killer|killed due to memory pressure|OOMKilled|"
    r"exited with code 137|Out of memory: Killed process|oom-kill(?:er)?\b.{0,80}?python|"
    r"killed due to the node running low on memory|Ray killed this worker",
    "OOM killer",
    "memory pressure",
    "OOMKilled",
    "code 137",
    "Killed process",
    "oom-kill",
    "running low on memory",
    "Ray killed this worker",
)
# A process's death the parent noticed without an exit code (V1 0.9+ core_client.py: "Engine
# core proc EngineCore_DP0 died unexpectedly, shutting down client."; multiproc_executor.py:
# "Worker proc VllmWorker-0 died unexpectedly"): with no Python exception anywhere in the log,
# the process was ended by a signal, which at start-up is the host's (vLLM issue 27549).
_DIED_SILENTLY: Final = tolerant(
    r"(?:Engine core proc|Worker proc) \S{1,40} died unexpectedly", "died unexpectedly"
)
_EXCEPTION: Final = tolerant(
    r"Traceback \(most recent call last\)|\b[A-Z]\w*(?:Error|Exception): \S",
    "Traceback",
    "Error:",
    "Exception:",
    ignore_case=False,
)
_SHELL_SIGNAL: Final = {
    "Killed": 9,
    "Illegal instruction": 4,
    "Bus error": 7,
    "Segmentation fault": 11,
}
_CAUSE: Final = {
    9: "the host's OOM killer (SIGKILL): host RAM ran out, not GPU memory",
    4: "an illegal instruction (SIGILL): a kernel built for instructions this CPU runs "
    "differently (the CPU build's kernels on AVX-512/AMX hosts); no flag helps: use a build "
    "for this CPU",
    7: "a bus error (SIGBUS): the container's shared memory (/dev/shm) is too small; no vLLM "
    "flag helps: run the container with --ipc=host or a larger --shm-size",
    11: "a segmentation fault (SIGSEGV) in native code; no flag is known to help",
}


def _signal_seen(log: LogView) -> tuple[int, str, bool] | None:
    """The host signal the log shows, its evidence line, and whether the signal is inferred
    (a death with no exit code and no exception) rather than named."""
    for pattern in (_DIED, _CORE_PROCS):
        for m, evidence, _ in log.find_all(pattern):
            code = int(m.group("code"))
            if -code in HOST_SIGNALS:
                return -code, evidence, False
    found = log.find(_OOM_KILLER)
    if found is not None:
        return 9, found[1], False
    for m, evidence, _ in log.find_all(_SIGNAL_NAMED):
        name = m.group("name")
        number = m.group("num") or m.group("num2") or m.group("num3")
        sig = _SIGNAL_NAMES[name.upper()] if name else int(number)
        if sig in HOST_SIGNALS:
            return sig, evidence, False
    for line in log.physical:
        shell = _SHELL.match(line.message)
        if shell:
            return _SHELL_SIGNAL[shell.group("job") or shell.group("what")], line.raw, False
    silent = log.find(_DIED_SILENTLY)
    if silent is not None and log.find(_EXCEPTION) is None:
        return 9, silent[1], True
    # An exit code alone is not enough: vtc's own stop (and an operator's kill) send SIGKILL
    # too; the fallback names the signal without blaming the host.
    return None


# vLLM 0.4-0.10 CacheConfig.verify_with_parallel_config: swap_space x tensor_parallel_size
# against the host's RAM, a warning above 40 % and a ValueError above 70 %.
_SWAP_LINE: Final = tolerant(
    loose(
        r"(?P<how>Possibly too large|Too large) swap space\. (?P<used>[\d.]+) GiB out of the "
        r"(?P<total>[\d.]+) GiB total CPU memory is allocated for the swap space"
    ),
    "swap space",
)
SWAP_WARN_SHARE: Final = 0.4
DEFAULT_SWAP_GIB: Final = 4.0  # per GPU, vLLM 0.4-0.10 (EngineArgs.swap_space)


def _swap_value(log: LogView) -> float | None:
    swap = log.value("swap_space")
    return float(swap) if isinstance(swap, int | float) and not isinstance(swap, bool) else None


def swap_fix(log: LogView) -> Fix | None:
    """A swap space whose pinned total stays under 40 % of host RAM (from vLLM's own line),
    else none when the run's swap space is vLLM's default."""
    found = log.find(_SWAP_LINE)
    swap = _swap_value(log)
    if found is not None:
        used, total = float(found[0].group("used")), float(found[0].group("total"))
        per_rank = swap if swap else DEFAULT_SWAP_GIB  # not set: vLLM's default
        ranks = max(1, round(used / per_rank)) if per_rank else 1
        new = math.floor(SWAP_WARN_SHARE * total / ranks)
        if new >= per_rank:
            return None
        return _swap(log, new, f"{used:g} of {total:g} GiB of host RAM pinned for swap")
    if swap is not None and swap > DEFAULT_SWAP_GIB:
        return _swap(log, 0, f"{swap:g} GiB of pinned host RAM per GPU")
    return None


def _swap(log: LogView, new: int, why: str) -> Fix:
    option = f"--swap-space={new}"
    extra = (option,) if log.flags is None else (*log.flags.extra_args, option)
    return Fix(title=f"Lower --swap-space to {new} GiB ({why})", set={"extra_args": extra})


def swap_space_too_large(log: LogView) -> Diagnosis | None:
    """vLLM 0.4-0.10 refusing a swap space above 70 % of host RAM (a ValueError at start)."""
    found = log.find(_SWAP_LINE)
    if found is None or found[0].group("how").lower().startswith("possibly"):
        return None
    m, evidence = found
    fix = swap_fix(log)
    return make(
        log,
        "invalid_flag_value",
        f"--swap-space pins {m.group('used')} GiB of the host's {m.group('total')} GiB of RAM "
        "(over 70 %: vLLM refuses it); a smaller swap space fits",
        evidence,
        {"flag": "swap_space", "value": _swap_value(log), "host_ram_gib": float(m.group("total"))},
        [fix] if fix else [],
    )


def _host_ram_fixes(log: LogView) -> list[Fix]:
    """What gives host RAM back: CPU offload, swap space, the CPU backend's KV cache."""
    fixes: list[Fix] = []
    offload = log.value("cpu_offload_gb")
    if log.explicit("cpu_offload_gb") and isinstance(offload, int | float) and offload > 0:
        fixes.append(
            Fix(
                title=f"Unset cpu_offload_gb ({offload:g} GiB of weights held in host RAM)",
                set={"cpu_offload_gb": None},
            )
        )
    swap = swap_fix(log)
    if swap is not None:
        fixes.append(swap)
    if log.device == "cpu":
        util = util_setting(log)
        lower = floor2(util.value - 0.1)
        if lower > 0:
            fixes.append(
                Fix(
                    title=util_change(
                        "Lower", util, lower, "on the CPU backend it sizes the KV cache in host RAM"
                    ),
                    set={"gpu_memory_utilization": lower},
                )
            )
    return fixes


def worker_killed(log: LogView) -> Diagnosis | None:
    """A vLLM process ended by a signal from the host (OOM killer, SIGILL, SIGBUS, SIGSEGV)."""
    seen = _signal_seen(log)
    if seen is None:
        return None
    sig, evidence, inferred = seen
    facts: dict[str, Any] = {"signal": signal.Signals(sig).name, "signal_number": sig}
    if inferred:  # no exit code: the signal is the likely one, not one the log names
        facts["signal_inferred"] = True
    fixes = _host_ram_fixes(log) if sig == 9 else []
    cause = _CAUSE[sig]
    if sig == 9:
        cause += (
            "; the fix gives host RAM back"
            if fixes
            else "; no flag of this run holds host RAM: free memory on the host, add RAM or "
            "swap, or load a smaller model"
        )
    head = (
        "a vLLM process died with no exception above it, so by a signal: most likely "
        if inferred
        else "a vLLM process was killed by "
    )
    return make(log, "worker_killed", head + cause, evidence, facts, fixes)
