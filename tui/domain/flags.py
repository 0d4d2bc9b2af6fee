"""The tunable ``vllm serve`` flags, each declared exactly once.

``ServeFlags`` is the single declaration: every field carries its CLI spelling, aliases, type,
vLLM's own default, its range and help text. Everything else is rendered from it: the argv
that launches a server (:meth:`ServeFlags.to_argv`), the console's form (:func:`flag_specs`),
preset TOML (:meth:`ServeFlags.to_toml_dict`) and the parse of a ``vllm serve ...`` command
line (:func:`parse_serve_argv`).

Ranges, choices and cross-field rules follow vLLM 0.32.0 as quoted in
``vllm-0.32-reference.md`` sections 1.3-1.5; the error texts are vLLM's where vLLM has one, so
the operator reads the same words in the form that the server would have printed.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, get_args

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tui.domain.humanint import format_human_bytes, parse_human_int, parse_human_int_or_auto

# vLLM 0.32.0 config/cache.py:39-59
KV_CACHE_DTYPES = (
    "auto", "bfloat16", "float16", "fp8", "fp8_ds_mla", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
    "fp8_per_token_head", "int4_per_token_head", "int8_per_token_head", "nvfp4",
    "nvfp4_4over6", "nvfp4_ds_mla", "turboquant_3bit_nc", "turboquant_4bit_nc",
    "turboquant_k3v4_nc", "turboquant_k8v4", "ultraquant_4bit",
)  # fmt: skip
# vLLM 0.32.0 config/model.py:99
DTYPES = ("auto", "bfloat16", "float", "float16", "float32", "half")
# vLLM 0.32.0 model_executor/layers/quantization/__init__.py:15-50
QUANTIZATION_METHODS = (
    "awq", "auto_awq", "fp8", "fbgemm_fp8", "fp_quant", "modelopt", "modelopt_fp4",
    "modelopt_mxfp8", "modelopt_mixed", "auto_gptq", "gptq", "gptq_marlin", "awq_marlin",
    "humming", "compressed-tensors", "experts_int8", "quark", "moe_wna16", "torchao", "inc",
    "mxfp4", "gpt_oss_mxfp4", "deepseek_v4_fp8", "online", "fp8_per_tensor", "fp8_per_block",
    "fp8_per_channel", "int8_per_channel_weight_only", "nvfp4_per_token", "mxfp8",
)  # fmt: skip

KvCacheDtype = Literal[
    "auto", "bfloat16", "float16", "fp8", "fp8_ds_mla", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
    "fp8_per_token_head", "int4_per_token_head", "int8_per_token_head", "nvfp4",
    "nvfp4_4over6", "nvfp4_ds_mla", "turboquant_3bit_nc", "turboquant_4bit_nc",
    "turboquant_k3v4_nc", "turboquant_k8v4", "ultraquant_4bit",
]  # fmt: skip
ModelDtype = Literal["auto", "bfloat16", "float", "float16", "float32", "half"]


class FlagKind(StrEnum):
    """How a flag's value is typed on the command line."""

    INT = "int"
    FLOAT = "float"
    BOOL = "bool"  # BooleanOptionalAction: --x / --no-x
    CHOICE = "choice"
    STR = "str"


class FlagGroup(StrEnum):
    """Where a flag sits in the form; the order here is the form's order."""

    MEMORY = "Memory & KV cache"
    BATCHING = "Batching & scheduling"
    MODEL = "Model & precision"
    PARALLEL = "Parallelism"
    SERVER = "Server"


def flag(
    *,
    cli: str,
    help: str,
    group: FlagGroup,
    vllm_default: Any = None,
    config: str = "EngineArgs",
    aliases: tuple[str, ...] = (),
    human: bool = False,
    auto: bool = False,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    default: Any = None,
) -> Any:
    """Declare one flag: a pydantic ``Field`` whose extras hold what the CLI and form need.

    ``vllm_default`` is what vLLM uses when the flag is not passed (``None``: derived at run
    time, e.g. from the model config or the device). ``config`` names the vLLM config class
    whose pydantic validation reports a range error, so messages can read like vLLM's.
    """
    extra = {
        "cli": cli,
        "aliases": list(aliases),
        "group": group.value,
        "vllm_default": vllm_default,
        "config": config,
        "human": human,
        "auto": auto,
    }
    return Field(default=default, ge=ge, gt=gt, le=le, description=help, json_schema_extra=extra)


class ServeFlags(BaseModel):
    """A complete, valid ``vllm serve`` configuration.

    ``None`` means "not passed": vLLM then applies its own default (shown by
    :meth:`effective`). Constructing an instance validates ranges and cross-field rules, so an
    invalid flag set cannot exist as a ``ServeFlags`` and therefore cannot be launched.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, protected_namespaces=())

    model: str = Field(min_length=1, description="Model name or path (the positional MODEL).")

    # -- memory & KV cache ---------------------------------------------------------------
    gpu_memory_utilization: float | None = flag(
        cli="--gpu-memory-utilization", aliases=("--device-memory-utilization",),
        group=FlagGroup.MEMORY, vllm_default=0.92, config="CacheConfig", gt=0, le=1,
        help="Fraction of TOTAL device memory this instance may use (weights, activations, "
        "KV cache). On the CPU backend: fraction of the NUMA node's RAM.",
    )  # fmt: skip
    max_model_len: int | None = flag(
        cli="--max-model-len", group=FlagGroup.MEMORY, config="ModelConfig", ge=-1,
        human=True, auto=True,
        help="Longest sequence (prompt + output) served. Default: the model's context length. "
        "-1/auto fits it to the KV cache.",
    )  # fmt: skip
    block_size: int | None = flag(
        cli="--block-size", group=FlagGroup.MEMORY, config="CacheConfig", gt=0,
        help="Tokens per KV-cache block. Default 16 on GPU, 128 on CPU (multiple of 32 there).",
    )  # fmt: skip
    kv_cache_dtype: KvCacheDtype | None = flag(
        cli="--kv-cache-dtype", group=FlagGroup.MEMORY, vllm_default="auto",
        config="CacheConfig", help="KV-cache element type; fp8 halves KV memory per token.",
    )  # fmt: skip
    kv_cache_memory_bytes: int | None = flag(
        cli="--kv-cache-memory-bytes", group=FlagGroup.MEMORY, config="CacheConfig", ge=0,
        human=True,
        help="Exact KV-cache size (e.g. 20G, 64M); overrides gpu_memory_utilization sizing.",
    )  # fmt: skip
    num_gpu_blocks_override: int | None = flag(
        cli="--num-gpu-blocks-override", group=FlagGroup.MEMORY, config="CacheConfig", ge=1,
        help="Replace the profiled number of KV blocks (testing and what-if runs).",
    )  # fmt: skip
    cpu_offload_gb: float | None = flag(
        cli="--cpu-offload-gb", group=FlagGroup.MEMORY, vllm_default=0.0,
        config="UVAOffloadConfig", ge=0,
        help="GiB of weights kept in CPU RAM and streamed in each step: fits bigger models, "
        "costs throughput.",
    )  # fmt: skip
    enable_prefix_caching: bool | None = flag(
        cli="--enable-prefix-caching", group=FlagGroup.MEMORY, config="CacheConfig",
        help="Reuse KV blocks of shared prompt prefixes. Default: the model's default (on).",
    )  # fmt: skip

    # -- batching & scheduling ------------------------------------------------------------
    max_num_seqs: int | None = flag(
        cli="--max-num-seqs", group=FlagGroup.BATCHING, config="SchedulerConfig", ge=1,
        help="Most sequences in one batch. Default 256 (1024 on >=70 GiB GPUs, 128 on CPU).",
    )  # fmt: skip
    max_num_batched_tokens: int | None = flag(
        cli="--max-num-batched-tokens", group=FlagGroup.BATCHING, config="SchedulerConfig",
        ge=1, human=True,
        help="Token budget of one scheduler step. Default 2048 (8192 on >=70 GiB GPUs).",
    )  # fmt: skip
    enable_chunked_prefill: bool | None = flag(
        cli="--enable-chunked-prefill", group=FlagGroup.BATCHING, config="SchedulerConfig",
        help="Split long prompts across steps. Default: the model's default (on).",
    )  # fmt: skip
    max_logprobs: int | None = flag(
        cli="--max-logprobs", group=FlagGroup.BATCHING, vllm_default=20,
        config="ModelConfig", ge=-1, help="Most logprobs a request may ask for (-1: no cap).",
    )  # fmt: skip

    # -- model & precision ----------------------------------------------------------------
    dtype: ModelDtype | None = flag(
        cli="--dtype", group=FlagGroup.MODEL, vllm_default="auto", config="ModelConfig",
        help="Weights/activations type; auto takes the checkpoint's.",
    )  # fmt: skip
    quantization: str | None = flag(
        cli="--quantization", aliases=("-q",), group=FlagGroup.MODEL, config="ModelConfig",
        help="Quantization method (awq, gptq, fp8, ...). Default: read from the checkpoint.",
    )  # fmt: skip
    enforce_eager: bool | None = flag(
        cli="--enforce-eager", group=FlagGroup.MODEL, vllm_default=False,
        config="ModelConfig",
        help="Skip torch.compile and CUDA graphs: faster start, less memory, slower decode.",
    )  # fmt: skip

    # -- parallelism ----------------------------------------------------------------------
    tensor_parallel_size: int | None = flag(
        cli="--tensor-parallel-size", aliases=("-tp",), group=FlagGroup.PARALLEL,
        vllm_default=1, config="ParallelConfig", ge=1,
        help="GPUs one layer is split across; attention heads must divide by it.",
    )  # fmt: skip
    pipeline_parallel_size: int | None = flag(
        cli="--pipeline-parallel-size", aliases=("-pp",), group=FlagGroup.PARALLEL,
        vllm_default=1, config="ParallelConfig", ge=1, help="Pipeline stages (GPUs in series).",
    )  # fmt: skip

    # -- server ---------------------------------------------------------------------------
    port: int | None = flag(
        cli="--port", group=FlagGroup.SERVER, vllm_default=8000, config="FrontendArgs",
        ge=1, le=65535, help="HTTP port of the OpenAI-compatible server.",
    )  # fmt: skip
    host: str | None = flag(
        cli="--host", group=FlagGroup.SERVER, config="FrontendArgs",
        help="Interface to bind (default: all).",
    )  # fmt: skip
    served_model_name: str | None = flag(
        cli="--served-model-name", group=FlagGroup.SERVER, config="ModelConfig",
        help="Name clients use in requests; the first is the metrics' model_name label.",
    )  # fmt: skip

    extra_args: tuple[str, ...] = Field(
        default=(), description="Any other vllm serve arguments, passed through verbatim."
    )

    @model_validator(mode="after")
    def _cross_field_rules(self) -> ServeFlags:
        """vLLM's cross-field checks (reference 1.5), in vLLM's words."""
        problems: list[str] = []
        q = self.quantization
        if q is not None and q not in QUANTIZATION_METHODS:
            problems.append(
                f"Unknown quantization method: {q}. Must be one of {list(QUANTIZATION_METHODS)}."
            )
        mnbt, mns, mml = self.max_num_batched_tokens, self.max_num_seqs, self.max_model_len
        # config/scheduler.py:314-357. Only checkable when both values are explicit: vLLM
        # derives an unset one with min(), which keeps the pair consistent.
        if mnbt is not None and mns is not None and mnbt < mns:
            problems.append(
                f"max_num_batched_tokens ({mnbt}) must be greater than or equal to "
                f"max_num_seqs ({mns})."
            )
        if (
            self.enable_chunked_prefill is False
            and mnbt is not None
            and mml is not None
            and mml > 0
            and mnbt < mml
        ):
            problems.append(
                f"max_num_batched_tokens ({mnbt}) is smaller than max_model_len ({mml}). This "
                "effectively limits the maximum sequence length to max_num_batched_tokens and "
                "makes vLLM reject longer sequences. Please increase max_num_batched_tokens or "
                "decrease max_model_len."
            )
        if problems:
            raise ValueError(" ".join(problems))
        return self

    # -- rendering --------------------------------------------------------------------------
    def to_argv(self) -> list[str]:
        """The arguments after ``vllm serve``: MODEL first, then each flag that is set."""
        argv = [self.model]
        for spec in flag_specs():
            value = getattr(self, spec.name)
            if value is None:
                continue
            argv.extend(spec.render(value))
        argv.extend(self.extra_args)
        return argv

    def command_line(self, executable: str = "vllm") -> str:
        """A copy-pasteable shell rendering, for display only (launches use argv lists)."""
        return shlex.join([executable, "serve", *self.to_argv()])

    def effective(self, name: str) -> Any:
        """The value vLLM will use for ``name``: the set value, else vLLM's static default."""
        value = getattr(self, name)
        if value is None:
            return flag_spec(name).vllm_default
        return value

    def explicit(self) -> dict[str, Any]:
        """The flags that are set, by snake_case name (model and extra args excluded)."""
        return {
            s.name: getattr(self, s.name) for s in flag_specs() if getattr(self, s.name) is not None
        }

    def to_toml_dict(self) -> dict[str, Any]:
        """The ``[flags]`` table of a preset: set flags only, extra args as a list."""
        out: dict[str, Any] = dict(self.explicit())
        if self.extra_args:
            out["extra_args"] = list(self.extra_args)
        return out

    def replace(self, **changes: Any) -> ServeFlags:
        """A validated copy with ``changes`` applied (``None`` unsets a flag)."""
        data = self.model_dump()
        data.update(changes)
        return ServeFlags.model_validate(data)

    @property
    def effective_port(self) -> int:
        """The port the server will listen on."""
        return int(self.effective("port"))


@dataclass(frozen=True)
class FlagSpec:
    """One flag as the CLI and the form see it, read from ``ServeFlags``' declaration."""

    name: str
    cli: str
    aliases: tuple[str, ...]
    kind: FlagKind
    group: FlagGroup
    help: str
    vllm_default: Any
    config: str
    choices: tuple[str, ...] | None = None
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    human: bool = False
    auto: bool = False

    @property
    def spellings(self) -> tuple[str, ...]:
        """Every option string that names this flag (``_`` and ``-`` both accepted later)."""
        return (self.cli, *self.aliases)

    def render(self, value: Any) -> list[str]:
        """This flag and ``value`` as argv tokens."""
        if self.kind is FlagKind.BOOL:
            return [self.cli] if value else ["--no-" + self.cli[2:]]
        if self.human and self.name.endswith("_bytes") and isinstance(value, int):
            return [self.cli, format_human_bytes(value)]
        if isinstance(value, float) and value.is_integer() and self.kind is FlagKind.FLOAT:
            return [self.cli, repr(value)]
        return [self.cli, str(value)]

    def parse(self, text: str) -> Any:
        """Type one textual value like vLLM's argparse does; ``ValueError`` in its words."""
        raw = text.strip()
        if self.kind is FlagKind.INT:
            try:
                if self.auto:
                    return parse_human_int_or_auto(raw)
                if self.human:
                    return parse_human_int(raw)
                return int(raw)
            except ValueError as exc:
                type_name = "human_readable_int" if self.human else "int"
                detail = (
                    str(exc) if "Decimals" in str(exc) else f"invalid {type_name} value: {text!r}"
                )
                raise ValueError(f"argument {self.cli}: {detail}") from exc
        if self.kind is FlagKind.FLOAT:
            try:
                return float(raw)
            except ValueError as exc:
                raise ValueError(f"argument {self.cli}: invalid float value: {text!r}") from exc
        if self.kind is FlagKind.CHOICE:
            assert self.choices is not None
            if raw not in self.choices:
                options = ", ".join(repr(c) for c in self.choices)
                raise ValueError(
                    f"argument {self.cli}: invalid choice: {raw!r} (choose from {options})"
                )
            return raw
        if self.kind is FlagKind.BOOL:
            lowered = raw.lower()
            if lowered in ("true", "1", "yes", "on"):
                return True
            if lowered in ("false", "0", "no", "off"):
                return False
            raise ValueError(f"argument {self.cli}: expected true or false, got {text!r}")
        return raw

    def describe_range(self) -> str:
        """A short human rendering of the allowed range, for the form's hint line."""
        parts = []
        if self.gt is not None:
            parts.append(f"> {_num(self.gt)}")
        if self.ge is not None:
            parts.append(f">= {_num(self.ge)}")
        if self.le is not None:
            parts.append(f"<= {_num(self.le)}")
        return ", ".join(parts)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _kind_and_choices(annotation: Any) -> tuple[FlagKind, tuple[str, ...] | None]:
    args = [a for a in get_args(annotation) if a is not type(None)]
    inner = args[0] if args else annotation
    if getattr(inner, "__origin__", None) is Literal:
        return FlagKind.CHOICE, tuple(get_args(inner))
    return {
        int: FlagKind.INT,
        float: FlagKind.FLOAT,
        bool: FlagKind.BOOL,
        str: FlagKind.STR,
    }[inner], None


_SPECS: tuple[FlagSpec, ...] | None = None


def flag_specs() -> tuple[FlagSpec, ...]:
    """Every tunable flag, in declaration order (model and extra args excluded)."""
    global _SPECS
    if _SPECS is None:
        specs = []
        for name, field in ServeFlags.model_fields.items():
            extra = field.json_schema_extra
            if not isinstance(extra, dict) or "cli" not in extra:
                continue
            kind, choices = _kind_and_choices(field.annotation)
            bounds: dict[str, float] = {}
            for meta in field.metadata:
                for attr in ("ge", "gt", "le"):
                    if isinstance(meta, getattr(annotated_types, attr.capitalize())):
                        bounds[attr] = getattr(meta, attr)
            specs.append(
                FlagSpec(
                    name=name,
                    cli=str(extra["cli"]),
                    aliases=tuple(extra["aliases"]),  # type: ignore[arg-type]
                    kind=kind,
                    group=FlagGroup(str(extra["group"])),
                    help=field.description or "",
                    vllm_default=extra["vllm_default"],
                    config=str(extra["config"]),
                    choices=choices,
                    human=bool(extra["human"]),
                    auto=bool(extra["auto"]),
                    **bounds,
                )
            )
        _SPECS = tuple(specs)
    return _SPECS


def flag_spec(name: str) -> FlagSpec:
    """The spec of one flag by snake_case name; ``KeyError`` if it is not declared."""
    for spec in flag_specs():
        if spec.name == name:
            return spec
    raise KeyError(name)


class ArgvError(ValueError):
    """A command line that vLLM's argparse would reject (exit code 2 there)."""


@dataclass(frozen=True)
class ParsedServeArgs:
    """A ``vllm serve`` command line, typed but not yet range-checked.

    ``values`` holds declared flags by snake_case name; ``extra`` keeps everything else in
    order so nothing the operator typed is lost.
    """

    model: str | None
    values: dict[str, Any]
    extra: tuple[str, ...]

    def to_flags(self) -> ServeFlags:
        """Validate into ``ServeFlags`` (raises pydantic ``ValidationError``)."""
        data: dict[str, Any] = dict(self.values)
        data["model"] = self.model or ""
        data["extra_args"] = self.extra
        return ServeFlags.model_validate(data)


def _spelling_index() -> dict[str, FlagSpec]:
    index: dict[str, FlagSpec] = {}
    for spec in flag_specs():
        for spelling in spec.spellings:
            index[spelling.replace("_", "-")] = spec
    return index


def parse_serve_argv(argv: Sequence[str]) -> ParsedServeArgs:
    """Parse ``[vllm] [serve] MODEL [flags...]`` like vLLM's ``FlexibleArgumentParser``.

    Accepts ``_`` or ``-`` in names, ``--flag=value``, ``--no-flag`` for booleans and the
    short aliases. Unknown options are kept verbatim in ``extra`` (with a following value if
    it does not look like an option). Raises :class:`ArgvError` for bad values or choices.
    """
    tokens = list(argv)
    if tokens and tokens[0].rsplit("/", 1)[-1] in ("vllm", "vtc-sim"):
        tokens = tokens[1:]
    if tokens and tokens[0] == "serve":
        tokens = tokens[1:]
    index = _spelling_index()
    values: dict[str, Any] = {}
    extra: list[str] = []
    model: str | None = None
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("-") or token == "-":
            if model is None:
                model = token
            else:
                extra.append(token)
            continue
        name, eq, inline = token.partition("=")
        norm = name if not name.startswith("--") else "--" + name[2:].replace("_", "-")
        negated = False
        spec = index.get(norm)
        if spec is None and norm.startswith("--no-"):
            candidate = index.get("--" + norm[5:])
            if candidate is not None and candidate.kind is FlagKind.BOOL:
                spec, negated = candidate, True
        if spec is None:
            extra.append(token)
            if not eq and i < len(tokens) and not _looks_like_option(tokens[i]):
                extra.append(tokens[i])
                i += 1
            continue
        if spec.kind is FlagKind.BOOL:
            values[spec.name] = spec.parse(inline) if eq else not negated
            continue
        if eq:
            text = inline
        elif i < len(tokens) and not _looks_like_option(tokens[i]):
            text = tokens[i]
            i += 1
        else:
            raise ArgvError(f"argument {spec.cli}: expected one argument")
        try:
            values[spec.name] = spec.parse(text)
        except ValueError as exc:
            raise ArgvError(str(exc)) from exc
    return ParsedServeArgs(model=model, values=values, extra=tuple(extra))


def _looks_like_option(token: str) -> bool:
    if not token.startswith("-") or token == "-":
        return False
    try:  # negative numbers such as -1 are values, not options
        float(token)
        return False
    except ValueError:
        return True


@dataclass(frozen=True)
class FlagProblem:
    """One reason a flag set is invalid, attached to a flag when it concerns one."""

    field: str | None
    message: str


def problems_from_error(exc: ValidationError) -> list[FlagProblem]:
    """Turn pydantic's ``ValidationError`` into per-flag problems for the form.

    Range errors keep pydantic's wording, which is exactly vLLM's (reference 1.5).
    Cross-field errors are attached to the first flag they name.
    """
    out: list[FlagProblem] = []
    for err in exc.errors():
        loc = err.get("loc", ())
        field = str(loc[0]) if loc else None
        message = err.get("msg", "invalid")
        if field is None:
            message = message.removeprefix("Value error, ")
            names = [s.name for s in flag_specs() if s.name in message]
            field = names[0] if names else None
        out.append(FlagProblem(field=field, message=message))
    return out


def validate_form(
    model: str, raw: Mapping[str, str], extra: str = ""
) -> tuple[ServeFlags | None, list[FlagProblem]]:
    """Validate the console form's text fields into ``ServeFlags``.

    Empty text means "not set". Returns the flags, or ``None`` with every problem found (type
    errors and range errors together, so the operator fixes them in one pass).
    """
    values: dict[str, Any] = {}
    problems: list[FlagProblem] = []
    for name, text in raw.items():
        if text is None or str(text).strip() == "":
            continue
        try:
            values[name] = flag_spec(name).parse(str(text))
        except ValueError as exc:
            problems.append(FlagProblem(field=name, message=str(exc)))
    try:
        extra_args = tuple(shlex.split(extra)) if extra.strip() else ()
    except ValueError as exc:
        problems.append(FlagProblem(field="extra_args", message=f"extra args: {exc}"))
        extra_args = ()
    if problems:
        return None, problems
    try:
        flags = ServeFlags.model_validate({"model": model, **values, "extra_args": extra_args})
    except ValidationError as exc:
        return None, problems_from_error(exc)
    return flags, []


@dataclass(frozen=True)
class FlagChange:
    """One flag whose effective value differs between two runs."""

    name: str
    old: Any
    new: Any


def diff_flags(old: ServeFlags, new: ServeFlags) -> list[FlagChange]:
    """Flags whose effective value differs, model and extra args included.

    Compares effective values, so an unset flag equals one set to vLLM's default.
    """
    changes: list[FlagChange] = []
    if old.model != new.model:
        changes.append(FlagChange("model", old.model, new.model))
    for spec in flag_specs():
        a, b = old.effective(spec.name), new.effective(spec.name)
        if a != b:
            changes.append(FlagChange(spec.name, a, b))
    if old.extra_args != new.extra_args:
        changes.append(FlagChange("extra_args", " ".join(old.extra_args), " ".join(new.extra_args)))
    return changes


def format_value(value: Any) -> str:
    """A compact rendering of a flag value for cards and diffs."""
    if value is None:
        return "default"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def names(specs: Iterable[FlagSpec]) -> list[str]:
    """The snake_case names of ``specs``."""
    return [s.name for s in specs]
