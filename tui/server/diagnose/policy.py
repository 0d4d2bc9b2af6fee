"""What makes an offered fix worth applying, for every kind alike.

The detectors compute fixes from the log's numbers; this module holds them to rules that do
not depend on the kind (a fix that sets a flag also drops it from the pass-through args,
where it would follow and beat the fixed value):

1. **Overrides first.** ``kv_cache_memory_bytes`` and ``num_gpu_blocks_override`` size the KV
   cache whatever ``gpu_memory_utilization`` says. A memory failure in a run that set one of
   them offers, first, to remove it; a fix that changes the utilization while one of them is
   set removes it too (else the "fixed" start fails again the same way).
2. **Never what just failed.** A fix that sets every flag to the value the run already had
   (or to the value the log names as rejected) changes nothing and is dropped; so is a
   duplicate.
3. **Never one the log shows cannot help.** A lower ``gpu_memory_utilization`` when the
   weights alone do not fit the GPU (``weights_oom``) or the CUDA graphs' memory ran out;
   ``--enforce-eager`` when the run was already eager; more GPUs than the box shows. Such a
   fix is refused, with the reason, under ``facts["refused_fixes"]``.
4. **Checked, or saying it was not.** With a :data:`~tui.domain.diagnosis.FixChecker` and the
   run's flags, each fix's flags go through the pre-flight check: a fix with problems is
   withheld (``facts["withheld_fixes"]``), the others are marked ``passed`` or, when the check
   cannot tell, ``not_checked`` with the reason.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import ValidationError

from tui.domain.diagnosis import Diagnosis, Fix, FixChecker
from tui.domain.flags.humanint import format_human_bytes
from tui.domain.flags.serve import ServeFlags
from tui.server.diagnose.common import run_was_eager, spec_by_name, without_flag
from tui.server.diagnose.reading import LogView

_MEMORY_KINDS: Final = frozenset(
    {"out_of_memory", "weights_oom", "insufficient_free_memory", "no_kv_cache_memory"}
)
_SIZING_OVERRIDES: Final = ("kv_cache_memory_bytes", "num_gpu_blocks_override")


def _current(log: LogView, name: str) -> Any:
    """The run's value of ``name`` when it set one (``None`` meaning vLLM's default)."""
    return log.value(name) if log.explicit(name) else None


def _overrides_set(log: LogView) -> dict[str, Any]:
    return {
        name: _current(log, name) for name in _SIZING_OVERRIDES if _current(log, name) is not None
    }


def _remove_override_fix(name: str, value: Any) -> Fix:
    shown = (
        format_human_bytes(value)
        if name == "kv_cache_memory_bytes" and isinstance(value, int)
        else value
    )
    return Fix(
        title=f"Remove {name} ({shown}): let gpu_memory_utilization size the KV cache",
        set={name: None},
    )


def overrides_first(diagnosis: Diagnosis, log: LogView) -> list[Fix]:
    """Rule 1: a set KV-sizing override is removed first, and by every utilization fix."""
    overrides = _overrides_set(log)
    if not overrides:
        return list(diagnosis.fixes)
    fixes: list[Fix] = []
    if diagnosis.kind in _MEMORY_KINDS:
        # Unless the detector already corrects the override (a better value than none).
        corrected = {name for fix in diagnosis.fixes for name in fix.set}
        fixes += [
            _remove_override_fix(name, value)
            for name, value in overrides.items()
            if name not in corrected
        ]
    for fix in diagnosis.fixes:
        if "gpu_memory_utilization" in fix.set and not any(n in fix.set for n in overrides):
            removed = ", ".join(overrides)
            fix = Fix(
                title=f"{fix.title}, and remove {removed} (it overrides the utilization)",
                set={**fix.set, **dict.fromkeys(overrides)},
            )
        fixes.append(fix)
    return fixes


def pass_through_removed(log: LogView, fixes: list[Fix]) -> list[Fix]:
    """A fix that sets a flag also takes it out of the pass-through args.

    ``extra_args`` follow the form's flags on the command line and vLLM keeps the last
    value: a ``--dtype bf16`` left there would beat the fix's ``dtype``.
    """
    if log.flags is None or not log.flags.extra_args:
        return fixes
    out: list[Fix] = []
    for fix in fixes:
        extra = tuple(fix.set.get("extra_args", log.flags.extra_args))
        for name in fix.set:
            spec = spec_by_name(name)
            if spec is not None:
                extra = without_flag(extra, spec)
        if extra != tuple(fix.set.get("extra_args", log.flags.extra_args)):
            fix = fix.model_copy(update={"set": {**fix.set, "extra_args": extra}})
        out.append(fix)
    return out


def _rejected(diagnosis: Diagnosis) -> dict[str, Any]:
    """Flag values the log names as the ones vLLM refused."""
    facts = diagnosis.facts
    out: dict[str, Any] = {}
    if isinstance(facts.get("flag"), str) and "value" in facts:
        out[facts["flag"]] = facts["value"]
    if diagnosis.kind == "unknown_quantization" and "quantization" in facts:
        out["quantization"] = facts["quantization"]
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return tuple(a) == tuple(b)
    return bool(a == b)


def _args_known(log: LogView) -> bool:
    """Whether the run's arguments are known (flags given, or logged by the server)."""
    return log.flags is not None or bool(log.non_default_args) or bool(log.namespace_args)


def _changes_nothing(log: LogView, fix: Fix) -> bool:
    if fix.env:
        # the run already had these variables (its environment is part of its flags)
        env = log.flags.environment if log.flags is not None else None
        if env is None or any(env.get(k) != v for k, v in fix.env.items()):
            return False
        if not fix.set:
            return True
    if not fix.set or "extra_args" in fix.set or not _args_known(log):
        return False
    return all(_same(_current(log, k), v) for k, v in fix.set.items())


def drop_what_failed(diagnosis: Diagnosis, log: LogView, fixes: list[Fix]) -> list[Fix]:
    """Rule 2: no fix that changes nothing, re-offers a rejected value, or repeats another."""
    rejected = _rejected(diagnosis)
    kept: list[Fix] = []
    seen: list[dict[str, Any]] = []
    for fix in fixes:
        if _changes_nothing(log, fix):
            continue
        if any(
            k in rejected and v is not None and _same(rejected[k], v) for k, v in fix.set.items()
        ):
            continue
        if fix.set and fix.set in seen:
            continue
        seen.append(fix.set)
        kept.append(fix)
    return kept


def _cannot_help(diagnosis: Diagnosis, log: LogView, fix: Fix) -> str | None:
    """Why the log itself shows ``fix`` cannot make the start succeed (``None``: it can)."""
    facts = diagnosis.facts
    if "gpu_memory_utilization" in fix.set:
        if diagnosis.kind == "weights_oom":
            return "the weights alone do not fit the GPU: no utilization makes room for them"
        if facts.get("stage") == "cuda_graph_capture":
            return "the CUDA graphs' memory ran out, which the utilization does not size"
    if fix.set.get("enforce_eager") is True and run_was_eager(log):
        return "the run was already eager (enforce_eager=True)"
    tp = fix.set.get("tensor_parallel_size")
    box = facts.get("gpus_on_box")
    if isinstance(tp, int) and isinstance(box, int) and tp > box:
        return f"tensor_parallel_size {tp} needs more GPUs than the {box} this box shows"
    return None


def refuse_what_cannot_help(
    diagnosis: Diagnosis, log: LogView, fixes: list[Fix]
) -> tuple[list[Fix], list[str]]:
    """Rule 3: the fixes the log does not rule out, and the refused ones with their reason."""
    kept: list[Fix] = []
    refused: list[str] = []
    for fix in fixes:
        why = _cannot_help(diagnosis, log, fix)
        if why is None:
            kept.append(fix)
        else:
            refused.append(f"{fix.title}: {why}")
    return kept, refused


def check_fixes(
    fixes: list[Fix], flags: ServeFlags | None, check: FixChecker | None
) -> tuple[list[Fix], list[str]]:
    """Rule 4: every fix passes the check or says why it was not checked; failures withheld."""
    if check is None:
        note = "no pre-flight check was available"
        return [f.model_copy(update={"check_note": note}) for f in fixes], []
    if flags is None:
        note = "the run's flags are not known, so the flags this fix produces cannot be checked"
        return [f.model_copy(update={"check_note": note}) for f in fixes], []
    offered: list[Fix] = []
    withheld: list[str] = []
    for fix in fixes:
        try:
            fixed = fix.applied_to(flags)
        except (ValidationError, ValueError, TypeError) as exc:
            withheld.append(f"{fix.title}: the flags it produces are invalid ({_first_line(exc)})")
            continue
        problems = check(fixed)
        if problems is None:
            offered.append(
                fix.model_copy(
                    update={
                        "check_note": "the pre-flight check could not tell (model or GPU unknown)"
                    }
                )
            )
        elif problems:
            withheld.append(f"{fix.title}: " + "; ".join(problems))
        else:
            offered.append(
                fix.model_copy(
                    update={"check": "passed", "check_note": "passes the pre-flight check"}
                )
            )
    return offered, withheld


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:199] + "…"


def _gpus_confirmed(
    diagnosis: Diagnosis, log: LogView, fixes: list[Fix]
) -> tuple[list[Fix], list[str]]:
    """A fix that raises tensor_parallel_size for memory is kept only where more GPUs are
    known to be there: the log shows the box's GPUs, or the pre-flight check of the machine
    passed it."""
    if diagnosis.facts.get("gpus_on_box") is not None or diagnosis.kind not in _MEMORY_KINDS:
        return fixes, []
    run_tp = log.value("tensor_parallel_size")
    current = run_tp if isinstance(run_tp, int) and not isinstance(run_tp, bool) else 1
    kept: list[Fix] = []
    refused: list[str] = []
    for fix in fixes:
        tp = fix.set.get("tensor_parallel_size")
        if isinstance(tp, int) and tp > current and fix.check != "passed":
            refused.append(
                f"{fix.title}: neither the log nor a pre-flight check shows {tp} GPUs on this box"
            )
        else:
            kept.append(fix)
    return kept, refused


def finish(diagnosis: Diagnosis, log: LogView, check: FixChecker | None) -> Diagnosis:
    """The diagnosis with its fixes held to the four rules."""
    fixes = pass_through_removed(log, overrides_first(diagnosis, log))
    fixes = drop_what_failed(diagnosis, log, fixes)
    fixes = [fix for fix in fixes if not fix.is_empty]  # a fix always changes something
    fixes, refused = refuse_what_cannot_help(diagnosis, log, fixes)
    offered, withheld = check_fixes(fixes, log.flags, check)
    offered, unconfirmed = _gpus_confirmed(diagnosis, log, offered)
    refused += unconfirmed
    facts = dict(diagnosis.facts)
    if refused:
        facts["refused_fixes"] = refused
    if withheld:
        facts["withheld_fixes"] = withheld
    return diagnosis.model_copy(update={"fixes": offered, "facts": facts})
