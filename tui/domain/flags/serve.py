"""The tunable ``vllm serve`` flags, each declared exactly once.

The fields are declared once, in :class:`~tui.domain.flags.serve_fields.ServeFields`: every
field carries its CLI spelling, aliases, type, vLLM's own default, its range and help text.
``ServeFlags`` adds vLLM's rules and the renderings; everything else is rendered from it:
the argv that launches a server (:meth:`ServeFlags.to_argv`), the console's form
(:func:`flag_specs`), preset TOML (:meth:`ServeFlags.to_toml_dict`) and the parse of a
``vllm serve ...`` command line.

Constructing a ``ServeFlags`` checks vLLM 0.32's rules that need nothing but the flags
(``vllm-0.32-reference.md`` sections 1.3-1.5, texts in vLLM's words): ranges, choices, the
cross-field rules; a declared flag given in the extra arguments moves into its field (or is
refused when the field holds a value too); secrets and options that would take the launch
out of vtc's hands are refused there. The one validation path every source of flags goes
through (form, ``vtc -- serve``, presets, ``--config`` YAML, fixes, sweeps) is
:mod:`tui.domain.flags.validation`; it adds the checks that need vLLM's parser table and,
when known, the device and the model.

A record read back from the history is validated with :func:`stored_context`: it shows what
ran, so the rules added since it was written do not refuse it (secrets are scrubbed).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import (
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from tui.domain.flags.declared_args import split_declared
from tui.domain.flags.problems import (
    ArgvError,
    FlagError,
    FlagProblem,
    join_problems,
    problems_from_error,
)
from tui.domain.flags.run_env import (
    ENV_FIELD,
    EnvPairs,
    applied,
    as_pairs,
    env_problems,
    normalized,
    text_problems,
    without_secrets,
)
from tui.domain.flags.secrets import find_secrets, secret_problems
from tui.domain.flags.serve_fields import (
    DTYPES,
    KV_CACHE_DTYPES,
    LAUNCH_HOST,
    KvCacheDtype,
    ModelDtype,
    ServeFields,
)
from tui.domain.flags.serve_rules import (
    QUANTIZATION_METHODS,
    batch_problems,
    extra_arg_problems,
    quantization_problems,
)
from tui.domain.flags.serve_spec import specs_of
from tui.domain.flags.spec import (
    INT64_MAX,
    FlagGroup,
    FlagKind,
    FlagSpec,
    format_value,
    is_finite,
)
from tui.domain.flags.vllm_tables import default_cli

__all__ = [
    "DTYPES",
    "KV_CACHE_DTYPES",
    "LAUNCH_HOST",
    "QUANTIZATION_METHODS",
    "ArgvError",
    "FlagError",
    "FlagGroup",
    "FlagKind",
    "FlagProblem",
    "FlagSpec",
    "KvCacheDtype",
    "ModelDtype",
    "ServeFields",
    "ServeFlags",
    "flag_spec",
    "flag_specs",
    "format_value",
    "names",
    "problems_from_error",
    "stored_context",
]

_STORED = "vtc_stored_record"
_INT_FIELDS = (
    "max_model_len",
    "block_size",
    "kv_cache_memory_bytes",
    "num_gpu_blocks_override",
    "max_num_seqs",
    "max_num_batched_tokens",
    "max_logprobs",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "port",
)
MAX_CPU_OFFLOAD_GB = 2**33  # 2^63 bytes: vLLM turns the GiB into a byte count


def stored_context() -> dict[str, Any]:
    """Validation context for a record read back from the history (see the module docstring)."""
    return {_STORED: True}


def _stored(info: ValidationInfo) -> bool:
    return isinstance(info.context, Mapping) and bool(info.context.get(_STORED))


class ServeFlags(ServeFields):
    """A complete, valid ``vllm serve`` configuration.

    ``None`` means "not passed": vLLM then applies its own default (shown by
    :meth:`effective`). Constructing an instance validates ranges and cross-field rules, so an
    invalid flag set cannot exist as a ``ServeFlags`` and therefore cannot be launched. The
    fields are declared in :class:`~tui.domain.flags.serve_fields.ServeFields`.
    """

    # -- vLLM's rules ---------------------------------------------------------------------
    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, data: Any, info: ValidationInfo) -> Any:
        """Lower-case the quantization (as vLLM does); declared flags leave the extra args."""
        if not isinstance(data, dict):
            return data
        if _stored(info):
            return _scrub_stored(data)
        data = dict(data)
        quant = data.get("quantization")
        if isinstance(quant, str):
            data["quantization"] = quant.lower()  # config/model.py:1041-1046
        return _move_declared(data)

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, value: Any, info: ValidationInfo) -> EnvPairs:
        """A mapping or pairs, sorted; names and values by :mod:`run_env`'s rules (a stored
        record only loses the secrets an older vtc might have kept)."""
        pairs = as_pairs(value)
        if _stored(info):
            return without_secrets(pairs)
        problems = env_problems(pairs)
        if problems:
            raise ValueError(join_problems(problems))
        return normalized(pairs)

    @field_serializer("env")
    def _env_table(self, value: EnvPairs) -> dict[str, str]:
        return dict(value)

    @field_validator("model", "host", "served_model_name")
    @classmethod
    def _not_blank(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or _stored(info):
            return value
        if not value.strip():
            if info.field_name == "model":
                raise ValueError("the model name or path is empty")
            raise ValueError("an empty value; leave the flag out for vLLM's default")
        if info.field_name == "host" and (value != value.strip() or " " in value):
            raise ValueError("a host name or address has no spaces")
        return value

    @field_validator(*_INT_FIELDS)
    @classmethod
    def _fits_int64(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value > INT64_MAX and not _stored(info):
            raise ValueError(
                f"Input should be less than or equal to {INT64_MAX} (vLLM passes it on as a "
                "64-bit integer)"
            )
        if info.field_name == "max_model_len" and value == 0 and not _stored(info):
            # config/model.py:1057-1062 (vLLM 0.32.0), its words
            raise ValueError(
                "max_model_len must be a positive integer, got int: 0. Example: max_model_len=2048"
            )
        return value

    @field_validator("gpu_memory_utilization", "cpu_offload_gb")
    @classmethod
    def _finite(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is None or _stored(info):
            return value
        if not is_finite(value):
            raise ValueError("Input should be a finite number")
        if info.field_name == "cpu_offload_gb" and value > MAX_CPU_OFFLOAD_GB:
            raise ValueError(
                f"Input should be less than or equal to {MAX_CPU_OFFLOAD_GB} (2^63 bytes)"
            )
        return value

    @model_validator(mode="after")
    def _cross_field_rules(self, info: ValidationInfo) -> ServeFlags:
        """vLLM's cross-field checks (reference 1.5), in vLLM's words; extra-args safety."""
        if _stored(info):
            return self
        problems = quantization_problems(self.quantization, self.extra_args)
        problems += batch_problems(
            self.max_num_batched_tokens,
            self.max_num_seqs,
            self.max_model_len,
            self.enable_chunked_prefill,
        )
        problems += [f"extra_args: {p.message}" for p in secret_problems(self.extra_args)]
        problems += extra_arg_problems(self.extra_args)
        problems += _control_problems(self)
        if problems:
            raise ValueError(join_problems(problems))
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
        """The ``[flags]`` table of a preset: set flags only, extra args as a list, the
        environment as a table."""
        out: dict[str, Any] = dict(self.explicit())
        if self.extra_args:
            out["extra_args"] = list(self.extra_args)
        if self.env:
            out[ENV_FIELD] = dict(self.env)
        return out

    @property
    def environment(self) -> dict[str, str]:
        """The run's environment variables by name (what the launcher adds to the server's)."""
        return dict(self.env)

    def with_env(self, changes: Mapping[str, str | None]) -> ServeFlags:
        """A validated copy with ``changes`` to the environment (``None`` removes one)."""
        return self.replace(env=applied(self.env, changes))

    def replace(self, **changes: Any) -> ServeFlags:
        """A validated copy with ``changes`` applied (``None`` unsets a flag).

        Raises :class:`FlagError` naming each refused value (a fix, a sweep step).
        """
        data = self.model_dump()
        data.update(changes)
        return validated(data)

    @property
    def effective_port(self) -> int:
        """The port the server will listen on."""
        return int(self.effective("port"))


def _move_declared(data: dict[str, Any]) -> dict[str, Any]:
    """Declared flags named in ``extra_args`` move into their fields (``ValueError`` if the
    field is set too, or a value is bad)."""
    extra = data.get("extra_args")
    if not extra or isinstance(extra, str) or not all(isinstance(t, str) for t in extra):
        return data  # nothing to move, or not text: the field's own validation says so
    split = split_declared(list(extra), flag_specs(), default_cli())
    problems = [f"extra_args: {p.line}" for p in split.problems]
    for name, value in split.values.items():
        current = data.get(name)
        if current is not None:
            problems.append(
                f"extra_args: {split.given[name]} in extra args, but {name} is also set "
                f"({format_value(current)}); vLLM would use the last one while vtc shows "
                "the other: keep one"
            )
        elif value is not None:
            data[name] = value
    if problems:
        raise ValueError(join_problems(problems))
    data["extra_args"] = tuple(split.rest)
    return data


def _scrub_stored(data: dict[str, Any]) -> dict[str, Any]:
    """A stored record's extra args without the secrets an older vtc kept there."""
    extra = data.get("extra_args")
    if not extra or not all(isinstance(t, str) for t in extra):
        return data
    hits = find_secrets(list(extra))
    if not hits:
        return data
    drop = {i for hit in hits for i in range(hit.start, hit.end)}
    return {**data, "extra_args": tuple(t for i, t in enumerate(extra) if i not in drop)}


def validated(data: Mapping[str, Any], *, context: Mapping[str, Any] | None = None) -> ServeFlags:
    """``ServeFlags`` from ``data``, or :class:`FlagError` naming each refused value."""
    try:
        return ServeFlags.model_validate(dict(data), context=dict(context or {}))
    except ValidationError as exc:
        raise FlagError(problems_from_error(exc, cli_names(), dict(data))) from None


def cli_names() -> dict[str, str]:
    """``--flag`` by field name, ``model`` included (how a problem names its flag)."""
    return {"model": "model", **{s.name: s.cli for s in flag_specs()}}


_SPECS: tuple[FlagSpec, ...] | None = None


def flag_specs() -> tuple[FlagSpec, ...]:
    """Every tunable flag, in declaration order (model and extra args excluded)."""
    global _SPECS
    if _SPECS is None:
        _SPECS = specs_of(ServeFlags)
    return _SPECS


def flag_spec(name: str) -> FlagSpec:
    """The spec of one flag by snake_case name; ``KeyError`` if it is not declared."""
    for spec in flag_specs():
        if spec.name == name:
            return spec
    raise KeyError(name)


def names(specs: Iterable[FlagSpec]) -> list[str]:
    """The snake_case names of ``specs``."""
    return [s.name for s in specs]


def _control_problems(flags: ServeFlags) -> list[str]:
    """A control character in the model, any flag's value or the extra args (refused at
    entry: no terminal may be sent one, no export can write it as the run used it)."""
    problems = text_problems("extra_args", flags.extra_args)
    problems += text_problems("model", [flags.model])
    for spec in flag_specs():
        problems += text_problems(spec.cli, [getattr(flags, spec.name)])
    return problems
