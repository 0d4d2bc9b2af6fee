"""Why did ``vllm serve`` fail? A pure function from a log to a :class:`Diagnosis`.

Shared by the console (after a failed start) and ``vtc diagnose LOGFILE``, so the same log
always gives the same answer. Every text matched here is quoted from the real CPU captures
(``vllm-cpu-captures/fail_*.log``, ``try_headdim16_kv1.log``) or from the GPU templates in
``vllm-0.32-reference.md`` sections 1.5 and 2 (which cite vLLM 0.32.0 file:line).

How a kind is chosen: detectors run in a fixed order, root causes first, and the first one
that matches decides. A wrapper such as ``RuntimeError: Engine core initialization failed.
See root cause above`` never wins over the EngineCore ``ValueError`` it wraps; engine-death
detectors run late, and the generic fallback last.

Every :class:`Fix` is computed from the numbers in the log (and the flags, when given):
``fix.set`` maps snake_case ``ServeFlags`` names to new values, ``None`` meaning "unset"
(vLLM's default).
"""

from __future__ import annotations

import ast
import difflib
import math
import re
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final

from tui.domain.diagnosis import Diagnosis, Fix
from tui.domain.flags import QUANTIZATION_METHODS, FlagKind, FlagSpec, ServeFlags, flag_specs
from tui.domain.humanint import format_human_bytes
from tui.server.stages import split_prefix

GIB: Final = 2**30
MIB: Final = 2**20

DEFAULT_BLOCK_SIZE_GPU: Final = 16  # config/cache.py:72,344-347
DEFAULT_BLOCK_SIZE_CPU: Final = 128  # platforms/cpu.py:292-293
BLOCK_MULTIPLE_GPU: Final = 16
BLOCK_MULTIPLE_CPU: Final = 32  # platforms/cpu.py:295-299; fail_b1 capture: MultipleOf(32)
DEFAULT_GPU_MEMORY_UTILIZATION: Final = 0.92
DEFAULT_PORT: Final = 8000
CPU_ATTENTION_HEAD_SIZES: Final = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
"""Head sizes the CPU attention kernels support (vllm-cpu-findings.md)."""

_CPU_MARKERS: Final = re.compile(
    r"\[cpu_worker\.py:|\[cpu_model_runner\.py:|\[cpu\.py:\d+\]|device_config=cpu\b|"
    r"\bCPU KV cache size\b|CPU_ATTN|Available memory on node \d+|"
    r"desired CPU memory utilization|Unsupported CPU attention"
)
# gpu_model_runner.py is no GPU marker: the CPU runner subclasses it (try_headdim16 capture).
_GPU_MARKERS: Final = re.compile(
    r"device_config=cuda\b|\bGPU KV cache size\b|\[gpu_worker\.py:|Free memory on device|"
    r"CUDA out of memory|torch\.cuda\.|\bNCCL\b|CUDA graphs?\b|not enough GPU memory"
)


# -- the parsed log -------------------------------------------------------------------------
@dataclass
class _Log:
    """The log split into raw lines and prefix-free messages, plus what the run was given."""

    raw: list[str]
    messages: list[str]
    flags: ServeFlags | None
    exit_code: int | None
    text: str
    facts: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str, flags: ServeFlags | None, exit_code: int | None) -> _Log:
        raw = [line.rstrip() for line in text.splitlines()]
        return cls(raw, [split_prefix(line).message for line in raw], flags, exit_code, text)

    def find(
        self, pattern: re.Pattern[str], needle: str | None = None
    ) -> tuple[re.Match[str], str] | None:
        """The first message matching ``pattern``, with its raw line (the evidence).

        ``needle``, a literal the match must contain, skips other lines cheaply: a pattern
        that starts with a group is otherwise tried at every position of every line.
        """
        for match, raw, _ in self.find_all(pattern, needle):
            return match, raw
        return None

    def find_all(
        self, pattern: re.Pattern[str], needle: str | None = None
    ) -> Iterator[tuple[re.Match[str], str, int]]:
        for i, message in enumerate(self.messages):
            if needle is not None and needle not in message:
                continue
            m = pattern.search(message)
            if m:
                yield m, self.raw[i], i

    @cached_property
    def device(self) -> str:
        """``cpu`` or ``gpu`` by the backend the log shows, ``unknown`` when it shows neither."""
        if _CPU_MARKERS.search(self.text):
            return "cpu"
        if _GPU_MARKERS.search(self.text):
            return "gpu"
        return "unknown"

    @cached_property
    def non_default_args(self) -> dict[str, Any]:
        """The ``non-default args: {...}`` dict vLLM logs at startup (api_utils.py:284-286)."""
        found = self.find(re.compile(r"non-default args: (\{.*\})\s*$"))
        if not found:
            return {}
        body = found[0].group(1)
        try:
            value = ast.literal_eval(body)
            return dict(value) if isinstance(value, dict) else {}
        except (ValueError, SyntaxError):
            # A value that is not a literal (an enum repr): fall back to simple pairs.
            pairs = re.findall(r"'(\w+)': ('[^']*'|-?[\d.]+|True|False|None)", body)
            out: dict[str, Any] = {}
            for key, val in pairs:
                try:
                    out[key] = ast.literal_eval(val)
                except (ValueError, SyntaxError):
                    continue
            return out

    def explicit(self, name: str) -> bool:
        """Whether the run set ``name`` (in the flags given, or in the log's non-default args)."""
        if self.flags is not None and getattr(self.flags, name, None) is not None:
            return True
        return name in self.non_default_args

    def value(self, name: str) -> Any:
        """The value the run used for ``name``: the flags, else the log's non-default args."""
        if self.flags is not None:
            v = getattr(self.flags, name, None)
            if v is not None:
                return v
        return self.non_default_args.get(name)

    def block_size(self) -> tuple[int, str]:
        """The KV block size and where it came from (flags, log, or the device default)."""
        if self.flags is not None and self.flags.block_size is not None:
            return self.flags.block_size, "flags"
        logged = self.non_default_args.get("block_size")
        if isinstance(logged, int) and logged > 0:
            return logged, "log"
        if self.device == "cpu":
            return DEFAULT_BLOCK_SIZE_CPU, "CPU default"
        return DEFAULT_BLOCK_SIZE_GPU, "GPU default"  # also when the log names no device

    def port(self) -> int:
        """The port the server tried to use."""
        v = self.value("port")
        if isinstance(v, int):
            return v
        for pattern in (
            re.compile(r"bind on address \('[^']*', (\d+)\)"),
            re.compile(r"(?:Starting vLLM (?:API )?server(?: \d+)?|Uvicorn running) on \S+:(\d+)"),
        ):
            found = self.find(pattern)
            if found:
                return int(found[0].group(1))
        return DEFAULT_PORT


def _diag(
    log: _Log,
    kind: Any,
    summary: str,
    evidence: str,
    facts: dict[str, Any] | None = None,
    fixes: list[Fix] | None = None,
) -> Diagnosis:
    all_facts: dict[str, Any] = dict(facts or {})
    all_facts.setdefault("device", log.device)
    if log.exit_code is not None:
        all_facts.setdefault("exit_code", log.exit_code)
    return Diagnosis(
        kind=kind, summary=summary, facts=all_facts, fixes=fixes or [], evidence=evidence.strip()
    )


# -- small helpers ----------------------------------------------------------------------------
def _floor2(x: float) -> float:
    """Round down to 0.01 (the epsilon keeps 0.84 from becoming 0.83 by float error)."""
    return math.floor(x * 100 + 1e-9) / 100


def _ceil2(x: float) -> float:
    return math.ceil(x * 100 - 1e-9) / 100


def _ceil_mib(n_bytes: float) -> int:
    return math.ceil(n_bytes / MIB - 1e-9) * MIB


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _spec_by_spelling(text: str) -> FlagSpec | None:
    """The declared flag an option string or snake_case name refers to."""
    for piece in re.split(r"[/,\s]+", text.strip()):
        if not piece:
            continue
        norm = piece.replace("_", "-")
        for spec in flag_specs():
            if piece == spec.name or norm in (s.replace("_", "-") for s in spec.spellings):
                return spec
    return None


def _spec_by_name(name: str) -> FlagSpec | None:
    for spec in flag_specs():
        if spec.name == name:
            return spec
    return None


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _cast(spec: FlagSpec | None, value: float) -> Any:
    if spec is not None and spec.kind is FlagKind.FLOAT:
        return float(value)
    if float(value).is_integer():
        return int(value)
    return value


def _effective_util(log: _Log) -> float:
    util = log.value("gpu_memory_utilization")
    return float(util) if isinstance(util, int | float) else DEFAULT_GPU_MEMORY_UTILIZATION


# -- detectors ------------------------------------------------------------------------------
# Each takes the parsed log and returns a Diagnosis or None. _DETECTORS fixes their order.

_UNRECOGNIZED: Final = re.compile(r"unrecognized arguments: (?P<args>.+?)\s*$")


def _unknown_flag(log: _Log) -> Diagnosis | None:
    found = log.find(_UNRECOGNIZED)
    if not found:
        return None
    m, evidence = found
    tokens = m.group("args").split()
    options = [t for t in tokens if t.startswith("-")]
    facts: dict[str, Any] = {"arguments": tokens}
    hint = ""
    spellings = [s for spec in flag_specs() for s in spec.spellings if s.startswith("--")]
    for opt in options:
        close = difflib.get_close_matches(opt.split("=", 1)[0].replace("_", "-"), spellings, 1)
        if close:
            facts.setdefault("did_you_mean", {})[opt] = close[0]
    if facts.get("did_you_mean"):
        hint = " (did you mean " + ", ".join(facts["did_you_mean"].values()) + "?)"
    dropped = " ".join(tokens)
    fix_set: dict[str, Any] = {}
    # When the tokens came from the pass-through arguments, the fix can remove them there.
    flags = log.flags
    if flags is not None and flags.extra_args:
        extra = list(flags.extra_args)
        n = len(tokens)
        for i in range(len(extra) - n + 1):
            if extra[i : i + n] == tokens:
                fix_set = {"extra_args": tuple(extra[:i] + extra[i + n :])}
                break
    if not fix_set:
        for opt in options:  # an older vllm that lacks one of the console's own flags
            spec = _spec_by_spelling(opt.split("=", 1)[0])
            if spec is not None:
                fix_set[spec.name] = None
    return _diag(
        log,
        "unknown_flag",
        f"vllm serve does not accept {dropped}{hint}",
        evidence,
        facts,
        [Fix(title=f"Remove `{dropped}` from the command line{hint}", set=fix_set)],
    )


_INVALID_CHOICE: Final = re.compile(
    r"argument (?P<flag>[^:]+): invalid choice: '?(?P<value>[^'(]*?)'? "
    r"\(choose from (?P<choices>.*)\)"
)
_INVALID_TYPE: Final = re.compile(
    r"argument (?P<flag>[^:]+): invalid (?P<type>[\w]+) value: '?(?P<value>[^']*)'?"
)
_NOT_CONVERTIBLE: Final = re.compile(r"Value (?P<value>.+?) cannot be converted to (?P<type>.+?)\.")


def _invalid_choice(log: _Log) -> Diagnosis | None:
    found = log.find(_INVALID_CHOICE, "invalid choice")
    if not found:
        return None
    m, evidence = found
    flag_text, value = m.group("flag").strip(), m.group("value")
    choices = [c.strip().strip("'\"") for c in m.group("choices").split(",") if c.strip()]
    spec = _spec_by_spelling(flag_text)
    name = spec.name if spec else flag_text
    fixes: list[Fix] = []
    close = difflib.get_close_matches(value, choices, 1, 0.6)
    if spec is not None:
        if close:
            fixes.append(Fix(title=f"Use {spec.cli} {close[0]}", set={spec.name: close[0]}))
        default = spec.vllm_default if spec.vllm_default is not None else "vLLM's default"
        fixes.append(Fix(title=f"Unset {spec.cli} (use {default})", set={spec.name: None}))
    return _diag(
        log,
        "invalid_choice",
        f"{flag_text}: '{value}' is not one of {len(choices)} allowed values",
        evidence,
        {"flag": name, "value": value, "choices": choices},
        fixes,
    )


def _invalid_type(log: _Log) -> Diagnosis | None:
    found = log.find(_INVALID_TYPE, ": invalid ")
    if found:
        m, evidence = found
        flag_text = m.group("flag").strip()
        spec = _spec_by_spelling(flag_text)
        name = spec.name if spec else flag_text
        fixes = [Fix(title=f"Unset {spec.cli}", set={spec.name: None})] if spec else []
        return _diag(
            log,
            "invalid_flag_value",
            f"{flag_text}: '{m.group('value')}' is not a valid {m.group('type')}",
            evidence,
            {"flag": name, "value": m.group("value"), "expected_type": m.group("type")},
            fixes,
        )
    found = log.find(_NOT_CONVERTIBLE, "cannot be converted to")
    if found:
        m, evidence = found
        return _diag(
            log,
            "invalid_flag_value",
            f"value {m.group('value')} cannot be converted to {m.group('type')}",
            evidence,
            {"value": m.group("value"), "expected_type": m.group("type")},
        )
    return None


_DERIVED_MAX: Final = re.compile(
    r"User-specified max_model_len \((?P<mml>\d+)\) is greater than the derived max_model_len "
    r"\((?P<key>\w+)=(?P<derived>[\d.]+|None) or model_max_length=(?P<mdl>[\d.]+|None)"
)


def _max_model_len_exceeds_model(log: _Log) -> Diagnosis | None:
    found = log.find(_DERIVED_MAX)
    if not found:
        return None
    m, evidence = found
    mml = int(m.group("mml"))
    limits = [int(float(v)) for v in (m.group("derived"), m.group("mdl")) if v != "None"]
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
    return _diag(log, "max_model_len_exceeds_model", summary, evidence, facts, fixes)


# Scheduler cross-field rules (config/scheduler.py:314-357), raised inside a pydantic block.
_MNBT_LT_MML: Final = re.compile(
    r"max_num_batched_tokens \((?P<mnbt>\d+)\) is smaller than max_model_len \((?P<mml>\d+)\)"
)
_MNBT_LT_MNS: Final = re.compile(
    r"max_num_batched_tokens \((?P<mnbt>\d+)\) must be greater than or equal to "
    r"max_num_seqs \((?P<mns>\d+)\)"
)
_ACTIVE_GT_MNS: Final = re.compile(
    r"max_num_active_seqs \((?P<active>\d+)\) cannot be greater than max_num_seqs \((?P<mns>\d+)\)"
)


def _scheduler_rules(log: _Log) -> Diagnosis | None:
    found = log.find(_MNBT_LT_MML)
    if found:
        m, evidence = found
        mnbt, mml = int(m.group("mnbt")), int(m.group("mml"))
        return _diag(
            log,
            "invalid_flag_value",
            f"max_num_batched_tokens {mnbt} is below max_model_len {mml} with chunked prefill off",
            evidence,
            {
                "flag": "max_num_batched_tokens",
                "value": mnbt,
                "bound": f">= {mml}",
                "limit": mml,
                "max_model_len": mml,
            },
            [
                Fix(
                    title=f"Raise max_num_batched_tokens to {mml}",
                    set={"max_num_batched_tokens": mml},
                ),
                Fix(title=f"Lower max_model_len to {mnbt}", set={"max_model_len": mnbt}),
                Fix(title="Turn chunked prefill on", set={"enable_chunked_prefill": True}),
            ],
        )
    found = log.find(_MNBT_LT_MNS)
    if found:
        m, evidence = found
        mnbt, mns = int(m.group("mnbt")), int(m.group("mns"))
        return _diag(
            log,
            "invalid_flag_value",
            f"max_num_batched_tokens {mnbt} is below max_num_seqs {mns}",
            evidence,
            {
                "flag": "max_num_batched_tokens",
                "value": mnbt,
                "bound": f">= {mns}",
                "limit": mns,
                "max_num_seqs": mns,
            },
            [
                Fix(
                    title=f"Raise max_num_batched_tokens to {mns}",
                    set={"max_num_batched_tokens": mns},
                ),
                Fix(title=f"Lower max_num_seqs to {mnbt}", set={"max_num_seqs": mnbt}),
            ],
        )
    found = log.find(_ACTIVE_GT_MNS)
    if found:
        m, evidence = found
        active, mns = int(m.group("active")), int(m.group("mns"))
        return _diag(
            log,
            "invalid_flag_value",
            f"max_num_active_seqs {active} is above max_num_seqs {mns}",
            evidence,
            {"flag": "max_num_active_seqs", "value": active, "bound": f"<= {mns}", "limit": mns},
            [Fix(title=f"Raise max_num_seqs to {active}", set={"max_num_seqs": active})],
        )
    return None


# pydantic ValidationError blocks (reference 1.5):
#   1 validation error for CacheConfig
#   gpu_memory_utilization
#     Input should be less than or equal to 1 [type=less_than_equal, input_value=1.5, ...]
_PYDANTIC_HEADER: Final = re.compile(r"(?P<n>\d+) validation errors? for (?P<config>\w+)")
_PYDANTIC_DETAIL: Final = re.compile(
    r"^\s{2}(?P<msg>\S.*?)(?: \[type=(?P<type>\w+)(?:, input_value=(?P<value>.*?))?"
    r"(?:, input_type=\w+)?\])?\s*$"
)
_BOUND: Final = re.compile(
    r"Input should be (?P<op>less than or equal to|greater than or equal to|less than|greater than)"
    r" (?P<limit>-?[\d.]+)"
)
_OPS: Final = {
    "less than or equal to": "<=",
    "greater than or equal to": ">=",
    "less than": "<",
    "greater than": ">",
}


@dataclass(frozen=True)
class _PydanticError:
    field: str | None
    message: str
    value: Any
    op: str | None
    limit: float | None


def _pydantic_blocks(log: _Log) -> Iterator[tuple[str, list[_PydanticError], str]]:
    for m, raw, index in log.find_all(_PYDANTIC_HEADER, "validation error"):
        errors: list[_PydanticError] = []
        pending_field: str | None = None
        for message in log.messages[index + 1 : index + 1 + 4 * int(m.group("n")) + 4]:
            if not message.strip() or message.lstrip().startswith("For further information"):
                continue
            if not message.startswith(" ") and re.fullmatch(r"[\w.\[\]-]+", message.strip()):
                pending_field = message.strip()
                continue
            detail = _PYDANTIC_DETAIL.match(message)
            if not detail or not message.startswith("  "):
                break
            msg = detail.group("msg")
            bound = _BOUND.search(msg)
            value_text = detail.group("value")
            errors.append(
                _PydanticError(
                    field=pending_field,
                    message=msg,
                    value=_literal(value_text) if value_text is not None else None,
                    op=_OPS[bound.group("op")] if bound else None,
                    limit=float(bound.group("limit")) if bound else None,
                )
            )
            pending_field = None
            if len(errors) >= int(m.group("n")):
                break
        yield m.group("config"), errors, raw


def _without_flag(extra: tuple[str, ...], spec: FlagSpec) -> tuple[str, ...]:
    """``extra`` without ``spec``'s occurrences (``--flag V``, ``--flag=V``, ``--no-flag``)."""
    names = set(spec.spellings)
    if spec.kind is FlagKind.BOOL:
        names |= {"--no-" + n[2:] for n in spec.spellings if n.startswith("--")}
    out: list[str] = []
    i = 0
    while i < len(extra):
        token = extra[i]
        name, eq, _ = token.partition("=")
        norm = "--" + name[2:].replace("_", "-") if name.startswith("--") else name
        if norm in names:
            i += 2 if spec.kind is not FlagKind.BOOL and not eq else 1
            continue
        out.append(token)
        i += 1
    return tuple(out)


def _invalid_flag_value(log: _Log) -> Diagnosis | None:
    for config, errors, evidence in _pydantic_blocks(log):
        if not errors:
            continue
        fielded = [e for e in errors if e.field]
        # The root cause is the flag the operator set: vLLM derives others from it (setting
        # max_num_seqs 0 also makes the derived max_num_batched_tokens 0, capture fail_b3).
        explicit = [e for e in fielded if e.field and log.explicit(e.field)]
        chosen = explicit or fielded
        fixes: list[Fix] = []
        fix_set: dict[str, Any] = {}
        titles: list[str] = []
        extra = log.flags.extra_args if log.flags is not None else ()
        for err in chosen:
            assert err.field is not None
            spec = _spec_by_name(err.field)
            if spec is None:
                continue
            # A bad value passed through verbatim would still follow (and beat) the fixed
            # flag on the command line: the fix removes it from the pass-through args.
            extra = _without_flag(extra, spec)
            if err.op in ("<=", ">=") and err.limit is not None:
                fix_set[spec.name] = _cast(spec, err.limit)
                titles.append(f"{spec.name} {fix_set[spec.name]}")
            else:
                # A strict bound (> 0) has no closest valid value: unset for vLLM's default.
                fix_set[spec.name] = None
                default = spec.vllm_default if spec.vllm_default is not None else "default"
                titles.append(f"{spec.name} unset ({default})")
        if fix_set:
            if log.flags is not None and extra != log.flags.extra_args:
                fix_set["extra_args"] = extra
            fixes.append(Fix(title="Set " + ", ".join(titles), set=fix_set))
        root = chosen[0] if chosen else errors[0]
        facts: dict[str, Any] = {
            "config": config,
            "flag": root.field,
            "value": root.value,
            "bound": _bound_text(root),
            "limit": None
            if root.limit is None
            else _cast(_spec_by_name(root.field or ""), root.limit),
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
        return _diag(log, "invalid_flag_value", summary, evidence, facts, fixes)
    return None


def _bound_text(err: _PydanticError) -> str | None:
    if err.op is None or err.limit is None:
        return None
    return f"{err.op} {_num(err.limit)}"


def _num(x: float | None) -> str:
    if x is None:
        return ""
    return str(int(x)) if float(x).is_integer() else str(x)


_UNKNOWN_QUANT: Final = re.compile(
    r"Unknown quantization method: (?P<q>[^\s.]+(?:\.[^\s.]+)*)\. Must be one of"
)
_QUANT_MISMATCH: Final = re.compile(
    r"Quantization method specified in the model config \((?P<ckpt>[^)]+)\) does not match the "
    r"quantization method specified in the `quantization` argument \((?P<arg>[^)]+)\)"
)
_QUANT_PLATFORM: Final = re.compile(
    r"(?P<q>\S+) quantization is currently not supported in (?P<device>[^.]+)\."
)


def _unknown_quantization(log: _Log) -> Diagnosis | None:
    found = log.find(_QUANT_MISMATCH)
    if found:
        m, evidence = found
        ckpt, arg = m.group("ckpt"), m.group("arg")
        return _diag(
            log,
            "unknown_quantization",
            f"--quantization {arg} does not match the checkpoint's {ckpt}",
            evidence,
            {"quantization": arg, "checkpoint_quantization": ckpt},
            [
                Fix(
                    title=f"Use the checkpoint's quantization ({ckpt})", set={"quantization": ckpt}
                ),
                Fix(
                    title="Unset --quantization (use the checkpoint's)", set={"quantization": None}
                ),
            ],
        )
    found = log.find(_UNKNOWN_QUANT)
    if found:
        m, evidence = found
        q = m.group("q")
        fixes = [
            Fix(title=f"Use --quantization {c}", set={"quantization": c})
            for c in difflib.get_close_matches(q, QUANTIZATION_METHODS, 1, 0.6)
        ]
        fixes.append(Fix(title="Unset --quantization", set={"quantization": None}))
        return _diag(
            log,
            "unknown_quantization",
            f"unknown quantization method '{q}'",
            evidence,
            {"quantization": q},
            fixes,
        )
    found = log.find(_QUANT_PLATFORM, "quantization is currently not supported")
    if found:
        m, evidence = found
        q, device = m.group("q"), m.group("device").strip()
        return _diag(
            log,
            "unknown_quantization",
            f"{q} quantization is not supported on {device}",
            evidence,
            {"quantization": q, "platform": device},
            [Fix(title="Unset --quantization", set={"quantization": None})],
        )
    return None


_TP_HEADS: Final = re.compile(
    r"Total number of attention heads \((?P<heads>\d+)\) must be divisible by tensor parallel "
    r"size \((?P<tp>\d+)\)"
)


def _tp_not_divisible(log: _Log) -> Diagnosis | None:
    found = log.find(_TP_HEADS)
    if not found:
        return None
    m, evidence = found
    heads, tp = int(m.group("heads")), int(m.group("tp"))
    best = max(d for d in range(1, max(1, min(tp, heads)) + 1) if heads % d == 0)
    return _diag(
        log,
        "tp_not_divisible",
        f"{heads} attention heads do not divide by tensor_parallel_size {tp}; {best} is the "
        "largest size below it that does",
        evidence,
        {"num_attention_heads": heads, "tensor_parallel_size": tp, "suggested_tp": best},
        [Fix(title=f"Use tensor_parallel_size {best}", set={"tensor_parallel_size": best})],
    )


_WORLD: Final = re.compile(
    r"World size \((?P<ws>\d+)\) is larger than the number of available GPUs \((?P<gpus>\d+)\)"
)


def _world_size(log: _Log) -> Diagnosis | None:
    found = log.find(_WORLD)
    if not found:
        return None
    m, evidence = found
    ws, gpus = int(m.group("ws")), int(m.group("gpus"))
    pp_value = log.value("pipeline_parallel_size")
    pp = pp_value if isinstance(pp_value, int) and pp_value > 0 else 1
    fixes: list[Fix] = []
    if gpus >= 1:
        if 1 < pp <= gpus:
            tp_keep_pp = max(1, gpus // pp)
            fixes.append(
                Fix(
                    title=f"Use tensor_parallel_size {tp_keep_pp} (x {pp} pipeline stages)",
                    set={"tensor_parallel_size": tp_keep_pp},
                )
            )
        fix_set: dict[str, Any] = {"tensor_parallel_size": gpus}
        if pp > 1:
            fix_set["pipeline_parallel_size"] = 1
        fixes.append(Fix(title=f"Use all {gpus} GPU(s) for tensor parallelism", set=fix_set))
    return _diag(
        log,
        "world_size_exceeds_gpus",
        f"world size {ws} (tensor x pipeline parallel) needs more GPUs than the {gpus} available",
        evidence,
        {"world_size": ws, "gpu_count": gpus, "pipeline_parallel_size": pp},
        fixes,
    )


_PORT_IN_USE: Final = re.compile(
    r"\[Errno 98\] Address already in use|address already in use", re.I
)


def port_in_use_diagnosis(port: int, evidence: str, *, holder: str | None = None) -> Diagnosis:
    """The ``port_in_use`` diagnosis; the supervisor's pre-launch check uses it too.

    The fix proposes ``port + 1``; the caller is expected to probe for a port that is free.
    """
    who = f" by {holder}" if holder else ""
    facts: dict[str, Any] = {"port": port}
    if holder:
        facts["holder"] = holder
    return Diagnosis(
        kind="port_in_use",
        summary=f"port {port} is already in use{who}",
        facts=facts,
        fixes=[Fix(title=f"Use port {port + 1}", set={"port": port + 1})] if port < 65535 else [],
        evidence=evidence.strip(),
    )


def _port_in_use(log: _Log) -> Diagnosis | None:
    found = log.find(_PORT_IN_USE)
    if not found:
        return None
    d = port_in_use_diagnosis(log.port(), found[1])
    return _diag(log, d.kind, d.summary, d.evidence, d.facts, d.fixes)


_FREE_GPU: Final = re.compile(
    r"Free memory on device(?: (?P<dev>\S+))? \((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on "
    r"startup is less than desired GPU memory utilization \((?P<util>[\d.]+), (?P<req>[\d.]+) GiB\)"
)
_FREE_CPU: Final = re.compile(
    r"Available memory on node (?P<node>\d+) \((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on "
    r"startup is less than desired CPU memory utilization \((?P<util>[\d.]+), (?P<req>[\d.]+) GiB\)"
)
_FREE_CPU_KV: Final = re.compile(
    r"Available memory on node (?P<node>\d+) \((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on kv "
    r"cache allocation is less than requested memory for kv(?: \((?P<req>[^)]*)\))?"
)


def _utilization_that_fits(free_gib: float, total_gib: float) -> float:
    # The log rounds to 0.01 GiB: assume the worst case of both roundings.
    return _floor2(max(0.0, free_gib - 0.005) / (total_gib + 0.005))


def _cpu_kv_fix(free_gib: float) -> Fix | None:
    kv = min(GIB, int(free_gib * GIB / 2) // MIB * MIB)
    if kv < MIB:
        return None
    return Fix(
        title=f"Give the KV cache an explicit size ({format_human_bytes(kv)}); the utilization "
        "check is then skipped",
        set={"kv_cache_memory_bytes": kv},
    )


def _insufficient_free_memory(log: _Log) -> Diagnosis | None:
    for pattern, where in ((_FREE_GPU, "device"), (_FREE_CPU, "node")):
        found = log.find(pattern)
        if not found:
            continue
        m, evidence = found
        free, total = float(m.group("free")), float(m.group("total"))
        util, req = float(m.group("util")), float(m.group("req"))
        fit = _utilization_that_fits(free, total)
        place = m.group("dev") if where == "device" else f"node {m.group('node')}"
        facts: dict[str, Any] = {
            "free_gib": free,
            "total_gib": total,
            "requested_utilization": util,
            "requested_gib": req,
            "suggested_utilization": fit,
        }
        if place:
            facts["memory_location"] = place
        fixes: list[Fix] = []
        if fit > 0:
            fixes.append(
                Fix(
                    title=f"Lower gpu_memory_utilization to {fit} ({free} of {total} GiB is free)",
                    set={"gpu_memory_utilization": fit},
                )
            )
        if where == "node":
            kv_fix = _cpu_kv_fix(free)
            if kv_fix:
                fixes.append(kv_fix)
        label = "GPU" if where == "device" else "CPU"
        return _diag(
            log,
            "insufficient_free_memory",
            f"only {free} of {total} GiB is free on {place or 'the device'}, but "
            f"gpu_memory_utilization {util} asks for {req} GiB of {label} memory; {fit} fits",
            evidence,
            facts,
            fixes,
        )
    found = log.find(_FREE_CPU_KV)
    if found:
        m, evidence = found
        free, total = float(m.group("free")), float(m.group("total"))
        kv_fix = _cpu_kv_fix(free)
        return _diag(
            log,
            "insufficient_free_memory",
            f"only {free} of {total} GiB is free on node {m.group('node')}, less than the KV "
            f"cache asks for ({m.group('req') or 'unknown'})",
            evidence,
            {"free_gib": free, "total_gib": total, "requested": m.group("req")},
            [kv_fix] if kv_fix else [],
        )
    return None


_WEIGHTS_OOM: Final = re.compile(r"Failed to load model - not enough GPU memory")
_TRIED: Final = re.compile(r"Tried to allocate (?P<n>[\d.]+) (?P<unit>GiB|MiB)")
_CAPACITY: Final = re.compile(
    r"GPU (?P<gpu>\d+) has a total capacity of (?P<total>[\d.]+) GiB of which "
    r"(?P<free>[\d.]+) (?P<unit>GiB|MiB) is free"
)


def _oom_facts(log: _Log) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    found = log.find(_TRIED, "Tried to allocate")
    if found:
        n = float(found[0].group("n"))
        facts["tried_to_allocate_gib"] = round(
            n / 1024 if found[0].group("unit") == "MiB" else n, 3
        )
    found = log.find(_CAPACITY, "total capacity")
    if found:
        m = found[0]
        free = float(m.group("free"))
        facts["gpu_total_gib"] = float(m.group("total"))
        facts["gpu_free_gib"] = round(free / 1024 if m.group("unit") == "MiB" else free, 3)
    return facts


def _weights_oom(log: _Log) -> Diagnosis | None:
    found = log.find(_WEIGHTS_OOM)
    if not found:
        return None
    tp_value = log.value("tensor_parallel_size")
    tp = tp_value if isinstance(tp_value, int) and tp_value > 0 else 1
    fixes = [
        Fix(title=f"Split the weights over {tp * 2} GPUs", set={"tensor_parallel_size": tp * 2})
    ]
    if log.value("quantization") is None:
        fixes.append(Fix(title="Quantize the weights to fp8 on load", set={"quantization": "fp8"}))
    facts = _oom_facts(log)
    facts["tensor_parallel_size"] = tp
    tried = ""
    if "tried_to_allocate_gib" in facts:
        tried = f" (tried to allocate {facts['tried_to_allocate_gib']} GiB)"
    return _diag(
        log,
        "weights_oom",
        "the model weights do not fit in GPU memory" + tried,
        found[1],
        facts,
        fixes,
    )


_SAMPLER_OOM: Final = re.compile(
    r"CUDA out of memory occurred when warming up (?:the )?(?P<what>sampler|pooler)\b.*? with "
    r"(?P<n>\d+) dummy requests"
)
_CUDA_OOM: Final = re.compile(
    r"CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError|CUDA error: out of memory"
)


def _lower_util_fix(log: _Log) -> Fix | None:
    util = _effective_util(log)
    lower = _floor2(util - 0.05)
    if lower <= 0:
        return None
    return Fix(
        title=f"Lower gpu_memory_utilization from {util} to {lower} (room outside the KV cache)",
        set={"gpu_memory_utilization": lower},
    )


def _out_of_memory(log: _Log) -> Diagnosis | None:
    found = log.find(_SAMPLER_OOM)
    if found:
        m, evidence = found
        n = int(m.group("n"))
        half = max(1, n // 2)
        fixes = [Fix(title=f"Lower max_num_seqs to {half}", set={"max_num_seqs": half})]
        util_fix = _lower_util_fix(log)
        if util_fix:
            fixes.append(util_fix)
        return _diag(
            log,
            "out_of_memory",
            f"CUDA ran out of memory warming up the {m.group('what')} with {n} dummy requests",
            evidence,
            {"dummy_requests": n, **_oom_facts(log)},
            fixes,
        )
    found = log.find(_CUDA_OOM)
    if found:
        util_fix = _lower_util_fix(log)
        fixes = [util_fix] if util_fix else []
        mns = log.value("max_num_seqs")
        if isinstance(mns, int) and mns > 1:
            fixes.append(
                Fix(title=f"Lower max_num_seqs to {mns // 2}", set={"max_num_seqs": mns // 2})
            )
        return _diag(
            log,
            "out_of_memory",
            "the GPU ran out of memory during startup",
            found[1],
            _oom_facts(log),
            fixes,
        )
    return None


_KV_TOO_SMALL: Final = re.compile(
    r"max seq len \((?P<mml>\d+)\), \((?P<needed>[\d.]+) GiB KV cache is needed, which is larger "
    r"than the available KV cache memory \((?P<available>-?[\d.]+) GiB\)\. "
    r"(?:Based on the available memory, the estimated maximum model length is (?P<est>\d+)\. )?"
)
_KV_TOO_SMALL_OLD: Final = re.compile(
    r"The model's max seq len \((?P<mml>\d+)\) is larger than the maximum number of tokens that "
    r"can be stored in KV cache \((?P<tokens>\d+)\)"
)
_KV_SET: Final = re.compile(
    r"(?P<how>Auto|Explicitly) set \((?P<kv>[\d.]+)/(?P<total>[\d.]+)\) GiB for KV cache"
)


def _kv_memory_fixes(
    log: _Log,
    mml: int,
    bs: int,
    blocks_now: int | None,
    needed_gib: float | None,
    available_gib: float | None,
) -> list[Fix]:
    """Fixes that give the KV cache room for one request of ``mml`` tokens.

    ``blocks_now`` is the number of blocks the run had (estimated/block + vLLM's null block,
    reference 2.2) when the log says so.
    """
    blocks_needed = _cdiv(mml, bs) + 1  # + BlockPool's null block (kv_cache_utils.py:2627-2633)
    override = log.value("num_gpu_blocks_override")
    if isinstance(override, int):
        return [
            Fix(
                title=f"Raise num_gpu_blocks_override from {override} to {blocks_needed} "
                f"({_cdiv(mml, bs)} blocks of {bs} tokens plus the null block)",
                set={"num_gpu_blocks_override": blocks_needed},
            )
        ]
    kv_bytes = log.value("kv_cache_memory_bytes")
    needed_bytes: float | None = None
    if isinstance(kv_bytes, int) and kv_bytes > 0 and blocks_now:
        needed_bytes = kv_bytes / blocks_now * blocks_needed
    elif (
        isinstance(kv_bytes, int)
        and kv_bytes > 0
        and needed_gib
        and available_gib
        and available_gib > 0
    ):
        needed_bytes = kv_bytes * needed_gib / available_gib
    elif needed_gib:
        needed_bytes = (needed_gib + 0.01) * GIB  # + the log's rounding to 0.01 GiB
    fixes: list[Fix] = []
    if needed_bytes:
        new = _ceil_mib(needed_bytes)
        verb = "Raise" if isinstance(kv_bytes, int) else "Set"
        fixes.append(
            Fix(
                title=f"{verb} kv_cache_memory_bytes to {format_human_bytes(new)} (enough for one "
                f"{mml}-token request)",
                set={"kv_cache_memory_bytes": new},
            )
        )
    if not isinstance(kv_bytes, int) and needed_gib is not None and available_gib is not None:
        # Utilization sizing: the shortfall as a share of total memory, when the log names it.
        found = log.find(_KV_SET)
        if found:
            total = float(found[0].group("total"))
            util = _effective_util(log)
            new_util = _ceil2(util + (needed_gib - available_gib + 0.01) / total)
            if util < new_util <= 1.0:
                fixes.append(
                    Fix(
                        title=f"Raise gpu_memory_utilization from {util} to {new_util}",
                        set={"gpu_memory_utilization": new_util},
                    )
                )
    return fixes


def _kv_cache_too_small(log: _Log) -> Diagnosis | None:
    bs, bs_source = log.block_size()
    found = log.find(_KV_TOO_SMALL)
    if found:
        m, evidence = found
        mml = int(m.group("mml"))
        needed, available = float(m.group("needed")), float(m.group("available"))
        est = int(m.group("est")) if m.group("est") else None
        facts: dict[str, Any] = {
            "max_model_len": mml,
            "needed_gib": needed,
            "available_gib": available,
            "block_size": bs,
            "block_size_source": bs_source,
        }
        fixes: list[Fix] = []
        blocks_now: int | None = None
        if est:
            facts["estimated_max_model_len"] = est
            fit = (est // bs) * bs
            blocks_now = est // bs + 1
            if fit > 0:
                facts["suggested_max_model_len"] = fit
                fixes.append(
                    Fix(
                        title=f"Lower max_model_len to {fit} (the estimated maximum {est}, "
                        f"rounded down to the block size {bs})",
                        set={"max_model_len": fit},
                    )
                )
        fixes += _kv_memory_fixes(log, mml, bs, blocks_now, needed, available)
        override = log.value("num_gpu_blocks_override")
        if isinstance(override, int):
            facts["num_gpu_blocks_override"] = override
        most = f"; at most {est} tokens fit" if est else ""
        # Tiny caches print 0.0 GiB for both (capture fail_a2): then the GiB say nothing.
        gib = f" ({needed} GiB needed, {available} GiB available)" if needed >= 0.01 else ""
        return _diag(
            log,
            "kv_cache_too_small",
            f"max_model_len {mml} does not fit in the KV cache{gib}{most}",
            evidence,
            facts,
            fixes,
        )
    found = log.find(_KV_TOO_SMALL_OLD)
    if found:
        m, evidence = found
        mml, tokens = int(m.group("mml")), int(m.group("tokens"))
        fit = (tokens // bs) * bs
        facts = {
            "max_model_len": mml,
            "kv_cache_tokens": tokens,
            "block_size": bs,
            "block_size_source": bs_source,
        }
        fixes = []
        if fit > 0:
            facts["suggested_max_model_len"] = fit
            fixes.append(
                Fix(
                    title=f"Lower max_model_len to {fit} (the {tokens} KV-cache tokens, rounded "
                    f"down to the block size {bs})",
                    set={"max_model_len": fit},
                )
            )
        fixes += _kv_memory_fixes(
            log, mml, bs, tokens // bs + 1 if tokens >= bs else None, None, None
        )
        return _diag(
            log,
            "kv_cache_too_small",
            f"max_model_len {mml} is larger than the {tokens} tokens the KV cache holds",
            evidence,
            facts,
            fixes,
        )
    return None


_NO_KV: Final = re.compile(
    r"No available memory for the cache blocks|Cannot auto-fit max_model_len: not enough \w+ "
    r"memory available to serve even a single token"
)
_AVAILABLE_KV: Final = re.compile(r"Available KV cache memory: (?P<gib>-?[\d.]+) GiB")


def _no_kv_cache_memory(log: _Log) -> Diagnosis | None:
    found = log.find(_NO_KV)
    if not found:
        return None
    facts: dict[str, Any] = {}
    available = log.find(_AVAILABLE_KV)
    if available:
        facts["available_gib"] = float(available[0].group("gib"))
    kv_set = log.find(_KV_SET)
    if kv_set:
        facts["kv_gib"] = float(kv_set[0].group("kv"))
        facts["total_gib"] = float(kv_set[0].group("total"))
    fixes: list[Fix] = []
    if log.device == "cpu":
        fixes.append(
            Fix(
                title="Give the KV cache an explicit size of 1G (like VLLM_CPU_KVCACHE_SPACE=1)",
                set={"kv_cache_memory_bytes": GIB},
            )
        )
    else:
        util = _effective_util(log)
        raised = min(0.99, _floor2(util + 0.05))
        if raised > util:
            fixes.append(
                Fix(
                    title=f"Raise gpu_memory_utilization from {util} to {raised}",
                    set={"gpu_memory_utilization": raised},
                )
            )
    if facts.get("kv_gib") == 0:
        summary = f"the KV cache was given 0 of {facts['total_gib']} GiB (KV cache space 0)"
    elif "available_gib" in facts:
        summary = (
            "no memory is left for the KV cache after weights and activations "
            f"(available: {facts['available_gib']} GiB)"
        )
    else:
        summary = "no memory is left for the KV cache after weights and activations"
    return _diag(
        log,
        "no_kv_cache_memory",
        summary,
        found[1],
        facts,
        fixes,
    )


_NO_COMMON_BLOCK: Final = re.compile(
    r"No common block size for (?P<bs>\d+)(?: \((?P<detail>[^']*)\))?"
)


def _nearest_block(bs: int, multiple: int) -> int:
    return max(multiple, round(bs / multiple) * multiple)


def _unsupported_block_size(log: _Log) -> Diagnosis | None:
    found = log.find(_NO_COMMON_BLOCK)
    if not found:
        return None
    m, evidence = found
    bs = int(m.group("bs"))
    detail = m.group("detail") or ""
    multiples = [int(x) for x in re.findall(r"MultipleOf\((\d+)\)", detail)]
    default_multiple = BLOCK_MULTIPLE_CPU if log.device == "cpu" else BLOCK_MULTIPLE_GPU
    multiple = math.lcm(*multiples) if multiples else default_multiple
    allowed = [int(x) for x in re.findall(r"(?<![\w(])(\d+)(?![\w)])", detail)]
    if allowed and not multiples:
        best = min(allowed, key=lambda v: (abs(v - bs), v))
    else:
        best = _nearest_block(bs, multiple)
    return _diag(
        log,
        "unsupported_block_size",
        f"block_size {bs} is not supported by the attention backend"
        + (f" ({detail})" if detail else "")
        + f"; nearest valid: {best}",
        evidence,
        {
            "block_size": bs,
            "block_multiple": multiple,
            "suggested_block_size": best,
            "backends": detail,
        },
        [Fix(title=f"Use block_size {best}", set={"block_size": best})],
    )


_CPU_ATTN: Final = re.compile(r"Unsupported CPU attention configuration: head_dim=(?P<hd>\d+)")


def _unsupported_cpu_attention(log: _Log) -> Diagnosis | None:
    found = log.find(_CPU_ATTN)
    if not found:
        return None
    hd = int(found[0].group("hd"))
    sizes = ", ".join(str(s) for s in CPU_ATTENTION_HEAD_SIZES)
    return _diag(
        log,
        "engine_died",
        f"the engine died on its first request: CPU attention does not support head_dim={hd} "
        f"(supported: {sizes}); this model cannot run on the CPU backend",
        found[1],
        {"head_dim": hd, "supported_head_dims": list(CPU_ATTENTION_HEAD_SIZES)},
    )


_PROFILING_ERROR: Final = re.compile(
    r"Error in memory profiling\. Initial free memory (?P<init>[\d.]+) GiB, current free memory "
    r"(?P<cur>[\d.]+) GiB"
)
_ENGINE_TIMEOUT: Final = re.compile(
    r"Timed out waiting for engine core processes to start.*?Waited (?P<s>\d+)s"
)


def _profiling_or_engine_timeout(log: _Log) -> Diagnosis | None:
    found = log.find(_PROFILING_ERROR)
    if found:
        m, evidence = found
        init, cur = float(m.group("init")), float(m.group("cur"))
        return _diag(
            log,
            "unknown",
            f"memory profiling failed: free GPU memory changed from {init} to {cur} GiB while "
            "vLLM profiled; another process on the GPU released or took memory",
            evidence,
            {"initial_free_gib": init, "current_free_gib": cur},
        )
    found = log.find(_ENGINE_TIMEOUT)
    if found:
        m, evidence = found
        waited = int(m.group("s"))
        return _diag(
            log,
            "unknown",
            f"the engine did not start within {waited} s (VLLM_ENGINE_READY_TIMEOUT_S); slow "
            "weight loading is the usual cause",
            evidence,
            {"waited_s": waited},
        )
    return None


_ENGINE_DEAD: Final = re.compile(
    r"EngineDeadError|EngineCore encountered a fatal error|Engine core process \S+ died "
    r"unexpectedly|EngineCore encountered an issue"
)
_WORKER_FAILED: Final = re.compile(r"Worker failed with error '(?P<err>.+?)'(?:, please check|$)")
_HTTP_500: Final = re.compile(r'" 500 Internal Server Error')
_EXCEPTION: Final = re.compile(r"^(?:[\w.]+\.)?(?P<type>\w*(?:Error|Exception)): (?P<msg>.+)$")
_WRAPPERS: Final = re.compile(
    r"Engine core initialization failed|WorkerProc initialization failed|Worker failed with "
    r"error|EngineCore encountered an issue|See stack trace|EngineCore failed to start"
)


def _root_exception(log: _Log) -> tuple[str, str] | None:
    """The first exception line that is not a known wrapper: (text, raw line)."""
    for i, message in enumerate(log.messages):
        m = _EXCEPTION.match(message.strip())
        if m and not _WRAPPERS.search(message) and "Errno 24" not in message:
            return f"{m.group('type')}: {m.group('msg')}", log.raw[i]
    found = log.find(_WORKER_FAILED)
    if found:
        return found[0].group("err"), found[1]
    return None


def _engine_died(log: _Log) -> Diagnosis | None:
    found = log.find(_ENGINE_DEAD)
    if found is None and log.exit_code == 0:
        found = log.find(_HTTP_500)
    if found is None:
        return None
    root = _root_exception(log)
    cause = f": {root[0]}" if root else ""
    facts: dict[str, Any] = {}
    if root:
        facts["error"] = root[0]
    return _diag(
        log,
        "engine_died",
        f"the engine died while serving{cause}",
        root[1] if root else found[1],
        facts,
    )


def _fallback(log: _Log) -> Diagnosis:
    root = _root_exception(log)
    facts: dict[str, Any] = {}
    code = log.exit_code
    if code is not None and code < 0:
        try:
            facts["signal"] = signal.Signals(-code).name
        except ValueError:
            facts["signal"] = str(-code)
    how = ""
    if code is not None:
        how = f" (killed by {facts['signal']})" if "signal" in facts else f" with exit code {code}"
    if root:
        facts["error"] = root[0]
        return _diag(log, "unknown", f"the server failed{how}: {root[0]}", root[1], facts)
    errors = [raw for raw, msg in zip(log.raw, log.messages, strict=True) if " ERROR " in raw]
    evidence = errors[0] if errors else next((r for r in reversed(log.raw) if r.strip()), "")
    summary = (
        f"the server exited{how}; no known failure in the log"
        if code is not None
        else ("no known failure in the log")
    )
    return _diag(log, "unknown", summary, evidence, facts)


_DETECTORS: Final[tuple[Callable[[_Log], Diagnosis | None], ...]] = (
    # argparse and config validation fail first, in the API-server process, before any engine.
    _unknown_flag,
    _invalid_choice,
    _invalid_type,
    _max_model_len_exceeds_model,
    _scheduler_rules,
    _unknown_quantization,
    _tp_not_divisible,
    _world_size,
    _invalid_flag_value,  # generic pydantic blocks, after the specific texts they may carry
    _port_in_use,
    # Engine start (EngineCore / worker root causes, before their wrappers).
    _insufficient_free_memory,
    _weights_oom,
    _out_of_memory,
    _kv_cache_too_small,
    _no_kv_cache_memory,
    _unsupported_block_size,
    _profiling_or_engine_timeout,
    # Run-time engine death (after the engine was up).
    _unsupported_cpu_attention,
    _engine_died,
)


def diagnose(
    log_text: str, *, flags: ServeFlags | None = None, exit_code: int | None = None
) -> Diagnosis:
    """Diagnose a failed ``vllm serve`` run from its combined stdout/stderr.

    ``flags`` (what the run was launched with) refines the fixes, e.g. the block size a
    ``max_model_len`` is rounded to; without them the log's ``non-default args`` line is used.
    ``exit_code`` is recorded in the facts and named in the summary of an unknown failure.
    Always returns a Diagnosis: kind ``unknown`` when nothing known matches.
    """
    log = _Log.parse(log_text, flags, exit_code)
    for detect in _DETECTORS:
        result = detect(log)
        if result is not None:
            return result
    return _fallback(log)
