"""Config validation in the API-server process: ranges, cross-field rules, the model's length.

vLLM 0.4-0.9 raised plain ``ValueError``s from ``config.py``'s ``_verify_args`` ("GPU memory
utilization must be less than 1.0. Got 1.5."); vLLM 0.10+ validates the config dataclasses
with pydantic (reference 1.5), which prints ``N validation error(s) for XConfig``, each
error as ``field`` then ``  message [type=..., input_value=..., input_type=...]``. The
cross-field texts (``config/scheduler.py:314-357``, ``config/model.py``) kept their words and
only moved inside the pydantic block as ``Value error, ...``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from tui.domain.diagnosis import Diagnosis, Fix
from tui.server.diagnose.common import cast, literal, make, num, spec_by_name, without_flag
from tui.server.diagnose.reading import LogView, tolerant

_DERIVED_MAX: Final = tolerant(
    r"User-specified max_model_len \((?P<mml>\d+)\) is greater than the derived max_model_len "
    r"\((?P<key>\w+)=(?P<derived>[\d.]+|None)(?: or model_max_length=(?P<mdl>[\d.]+|None))?",
    "User-specified max_model_len",
)


def max_model_len_exceeds_model(log: LogView) -> Diagnosis | None:
    """``User-specified max_model_len (X) is greater than the derived max_model_len (...)``."""
    found = log.find(_DERIVED_MAX, "User-specified max_model_len")
    if not found:
        return None
    m, evidence = found
    mml = int(m.group("mml"))
    limits = [int(float(v)) for v in (m.group("derived"), m.group("mdl")) if v and v != "None"]
    facts: dict[str, Any] = {"max_model_len": mml, "derived_key": m.group("key")}
    fixes: list[Fix] = []
    if limits:
        derived = min(limits)
        facts["derived_max_model_len"] = derived
        fixes.append(
            Fix(
                title=f"Lower max_model_len to the model's {derived}",
                set={"max_model_len": derived},
            )
        )
        summary = (
            f"max_model_len {mml} exceeds the model's maximum {derived} "
            f"({m.group('key')}); VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 overrides it at your own risk"
        )
    else:
        summary = f"max_model_len {mml} exceeds the model's derived maximum"
    return make(log, "max_model_len_exceeds_model", summary, evidence, facts, fixes)


# Scheduler cross-field rules (config/scheduler.py:314-357; config.py _verify_args in 0.4-0.9).
_MNBT_LT_MML: Final = tolerant(
    r"max_num_batched_tokens \((?P<mnbt>\d+)\) is smaller than max_model_len \((?P<mml>\d+)\)",
    "is smaller than max_model_len",
)
_MNBT_LT_MNS: Final = tolerant(
    r"max_num_batched_tokens \((?P<mnbt>\d+)\) must be greater than or equal to "
    r"max_num_seqs \((?P<mns>\d+)\)",
    "must be greater than or equal to max_num_seqs",
)
_ACTIVE_GT_MNS: Final = tolerant(
    r"max_num_active_seqs \((?P<active>\d+)\) cannot be greater than max_num_seqs \((?P<mns>\d+)\)",
    "cannot be greater than max_num_seqs",
)


def _value_facts(flag: str, value: int, op: str, limit: int, **more: Any) -> dict[str, Any]:
    return {"flag": flag, "value": value, "bound": f"{op} {limit}", "limit": limit, **more}


def scheduler_rules(log: LogView) -> Diagnosis | None:
    """max_num_batched_tokens against max_model_len and max_num_seqs."""
    found = log.find(_MNBT_LT_MML, "max_num_batched_tokens")
    if found:
        m, evidence = found
        mnbt, mml = int(m.group("mnbt")), int(m.group("mml"))
        return make(
            log,
            "invalid_flag_value",
            f"max_num_batched_tokens {mnbt} is below max_model_len {mml} with chunked prefill off",
            evidence,
            _value_facts("max_num_batched_tokens", mnbt, ">=", mml, max_model_len=mml),
            [
                Fix(
                    title=f"Raise max_num_batched_tokens to {mml}",
                    set={"max_num_batched_tokens": mml},
                ),
                Fix(title=f"Lower max_model_len to {mnbt}", set={"max_model_len": mnbt}),
                Fix(title="Turn chunked prefill on", set={"enable_chunked_prefill": True}),
            ],
        )
    found = log.find(_MNBT_LT_MNS, "max_num_batched_tokens")
    if found:
        m, evidence = found
        mnbt, mns = int(m.group("mnbt")), int(m.group("mns"))
        return make(
            log,
            "invalid_flag_value",
            f"max_num_batched_tokens {mnbt} is below max_num_seqs {mns}",
            evidence,
            _value_facts("max_num_batched_tokens", mnbt, ">=", mns, max_num_seqs=mns),
            [
                Fix(
                    title=f"Raise max_num_batched_tokens to {mns}",
                    set={"max_num_batched_tokens": mns},
                ),
                Fix(title=f"Lower max_num_seqs to {mnbt}", set={"max_num_seqs": mnbt}),
            ],
        )
    found = log.find(_ACTIVE_GT_MNS, "max_num_active_seqs")
    if found:
        m, evidence = found
        active, mns = int(m.group("active")), int(m.group("mns"))
        return make(
            log,
            "invalid_flag_value",
            f"max_num_active_seqs {active} is above max_num_seqs {mns}",
            evidence,
            {"flag": "max_num_active_seqs", "value": active, "bound": f"<= {mns}", "limit": mns},
            [Fix(title=f"Raise max_num_seqs to {active}", set={"max_num_seqs": active})],
        )
    return None


# vLLM 0.4-0.9 CacheConfig._verify_args (config.py; config/cache.py in 0.10-0.11).
_UTIL_ABOVE_ONE: Final = tolerant(
    r"GPU memory utilization must be less than 1\.0\. Got (?P<value>-?[\d.]+)\.",
    "GPU memory utilization must be",
)


def legacy_range_errors(log: LogView) -> Diagnosis | None:
    """Range checks worded as plain ``ValueError``s before the pydantic configs."""
    found = log.find(_UTIL_ABOVE_ONE, "GPU memory utilization must be")
    if not found:
        return None
    m, evidence = found
    value = float(m.group("value"))
    return make(
        log,
        "invalid_flag_value",
        f"gpu_memory_utilization = {num(value)} is invalid: it must be at most 1.0",
        evidence,
        {"flag": "gpu_memory_utilization", "value": value, "bound": "<= 1", "limit": 1.0},
        [Fix(title="Set gpu_memory_utilization 1.0", set={"gpu_memory_utilization": 1.0})],
    )


_TP_HEADS: Final = tolerant(
    r"Total number of attention heads \((?P<heads>\d+)\) must be divisible by tensor parallel "
    r"size \((?P<tp>\d+)\)",
    "must be divisible by tensor parallel",
)


def tp_not_divisible(log: LogView) -> Diagnosis | None:
    """``Total number of attention heads (H) must be divisible by tensor parallel size (T).``"""
    found = log.find(_TP_HEADS, "must be divisible by tensor parallel")
    if not found:
        return None
    m, evidence = found
    heads, tp = int(m.group("heads")), int(m.group("tp"))
    best = max(d for d in range(1, max(1, min(tp, heads)) + 1) if heads % d == 0)
    return make(
        log,
        "tp_not_divisible",
        f"{heads} attention heads do not divide by tensor_parallel_size {tp}; {best} is the "
        "largest size below it that does",
        evidence,
        {"num_attention_heads": heads, "tensor_parallel_size": tp, "suggested_tp": best},
        [Fix(title=f"Use tensor_parallel_size {best}", set={"tensor_parallel_size": best})],
    )


# -- pydantic blocks (reference 1.5) ---------------------------------------------------------
#   1 validation error for CacheConfig
#   gpu_memory_utilization
#     Input should be less than or equal to 1 [type=less_than_equal, input_value=1.5, ...]
# Searched flat: the class name is the one ending in Config/Args (the field name that follows
# it on the next line is fused to it there), the field is snake_case, and the optional
# "For further information" link ends with the error's type.
_BLOCK: Final = tolerant(
    r"(?P<n>\d+) validation errors? for (?P<config>\w{0,80}?(?:Config|Args|Params)|[A-Z]\w{0,80}?)"
    r"(?= ?(?:[a-z_][a-z0-9_.]{0,80} ?)?(?:Input |Value error|Assertion failed|Field required|"
    r"Extra inputs|String should|List should|Unable to))",
    "validation error",
    ignore_case=False,
)
_ERROR: Final = tolerant(
    r" ?(?P<field>[a-z_][a-z0-9_.\[\]]{0,80})? (?P<msg>(?:Input |Value error|Assertion failed|"
    r"Field required|Extra inputs|String should|List should|Unable to).{0,3000}?) "
    r"\[type=(?P<type>\w+)(?:, input_value=(?P<value>.{0,300}?))?(?:, input_type=\w+)?\]"
    r"(?: For further information visit https?://errors\.pydantic\.dev/[\d.]+/v/(?P=type))?",
    ignore_case=False,
)
_BOUND: Final = tolerant(
    r"Input should be (?P<op>less than or equal to|greater than or equal to|less than|greater than)"
    r" (?P<limit>-?[\d.]+)"
)
_OPS: Final = {
    "lessthanorequalto": "<=",
    "greaterthanorequalto": ">=",
    "lessthan": "<",
    "greaterthan": ">",
}


@dataclass(frozen=True)
class PydanticError:
    """One error of a pydantic block."""

    field: str | None
    message: str
    value: Any
    op: str | None
    limit: float | None


def pydantic_blocks(log: LogView) -> Iterator[tuple[str, list[PydanticError], str]]:
    """Each ``N validation error(s) for XConfig`` block: (class, errors, evidence)."""
    for m, evidence, _ in log.find_all(_BLOCK, "validation error"):
        errors: list[PydanticError] = []
        pos = m.end()
        for _ in range(int(m.group("n"))):
            e = _ERROR.match(log.flat, pos)
            if e is None:
                break
            pos = e.end()
            msg = " ".join(e.group("msg").split())
            bound = _BOUND.search(msg)
            value_text = e.group("value")
            errors.append(
                PydanticError(
                    field=e.group("field") or None,
                    message=msg,
                    value=literal(value_text.strip()) if value_text is not None else None,
                    op=_OPS[bound.group("op").replace(" ", "")] if bound else None,
                    limit=float(bound.group("limit")) if bound else None,
                )
            )
        yield m.group("config"), errors, evidence


def _bound_text(err: PydanticError) -> str | None:
    if err.op is None or err.limit is None:
        return None
    return f"{err.op} {num(err.limit)}"


def _range_fix(log: LogView, chosen: list[PydanticError]) -> list[Fix]:
    """One fix for every flag out of range: the nearest valid value, or vLLM's default."""
    fix_set: dict[str, Any] = {}
    titles: list[str] = []
    extra = log.flags.extra_args if log.flags is not None else ()
    for err in chosen:
        spec = spec_by_name(err.field or "")
        if spec is None:
            continue
        # A bad value passed through verbatim would still follow (and beat) the fixed
        # flag on the command line: the fix removes it from the pass-through args.
        extra = without_flag(extra, spec)
        if err.op in ("<=", ">=") and err.limit is not None:
            fix_set[spec.name] = cast(spec, err.limit)
            titles.append(f"{spec.name} {fix_set[spec.name]}")
        else:
            # A strict bound (> 0) has no closest valid value: unset for vLLM's default.
            fix_set[spec.name] = None
            default = spec.vllm_default if spec.vllm_default is not None else "default"
            titles.append(f"{spec.name} unset ({default})")
    if not fix_set:
        return []
    if log.flags is not None and extra != log.flags.extra_args:
        fix_set["extra_args"] = extra
    return [Fix(title="Set " + ", ".join(titles), set=fix_set)]


def invalid_flag_value(log: LogView) -> Diagnosis | None:
    """The first pydantic block with errors: the flag the operator set is the root cause."""
    for config, errors, evidence in pydantic_blocks(log):
        fielded = [e for e in errors if e.field]
        if not fielded:
            continue  # a model-level "Value error, ..." names no flag: not a flag's value
        # The root cause is the flag the operator set: vLLM derives others from it (setting
        # max_num_seqs 0 also makes the derived max_num_batched_tokens 0, capture fail_b3).
        explicit = [e for e in fielded if e.field and log.explicit(e.field)]
        chosen = explicit or fielded
        root = chosen[0]
        facts: dict[str, Any] = {
            "config": config,
            "flag": root.field,
            "value": root.value,
            "bound": _bound_text(root),
            "limit": None
            if root.limit is None
            else cast(spec_by_name(root.field or ""), root.limit),
            "errors": [
                {"flag": e.field, "value": e.value, "message": e.message, "bound": _bound_text(e)}
                for e in errors
            ],
        }
        what = root.field or config
        summary = f"{what} = {root.value!r} is invalid: {root.message} ({config})"
        if root.value is None:
            summary = f"{what} is invalid: {root.message} ({config})"
        if len(errors) > 1:
            summary += f"; {len(errors)} validation errors in all"
        return make(log, "invalid_flag_value", summary, evidence, facts, _range_fix(log, chosen))
    return None
