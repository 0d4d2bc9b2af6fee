"""The one validation path for flag values, wherever they come from.

The form, ``vtc -- serve ...``, a preset, a ``--config`` YAML file, a diagnosis fix and a
sweep all turn their values into ``ServeFlags`` here, and a launch is gated by
:func:`ensure_valid`. The checks, in order, each vLLM 0.32's own (texts in vLLM's words,
``vllm-0.32-reference.md`` sections 1.3-1.5):

1. typing, as vLLM's argparse types each flag (:mod:`tui.domain.flags.spec`); from files,
   strict types (``max_num_seqs = true`` is refused, not read as 1);
2. ``ServeFlags``' own rules: ranges, cross-field rules, one value per flag, no secrets;
3. the extra arguments against vLLM's parser: every option known (or an unambiguous
   abbreviation), the right number of values, each typed as argparse types it, and the
   frontend's own checks (``validate_parsed_serve_args``);
4. when the caller knows them, the device (vLLM's derived batch limits) and the model
   (attention heads vs tensor parallelism; quantization methods that need a quantized
   checkpoint).

Rejections are :class:`~tui.domain.flags.problems.FlagError` (a ``VtcError``): one line naming
each flag, its value and the rule. A ``max_model_len`` above the model's own length is left
to the pre-flight estimate (a warning): vLLM accepts it with ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``
and rope scaling changes the limit, neither of which vtc can see.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tui.domain import budget
from tui.domain.flags.argv import strip_program
from tui.domain.flags.declared_args import split_declared
from tui.domain.flags.extra_args import extra_args_problems
from tui.domain.flags.problems import ArgvError, FlagError, FlagProblem
from tui.domain.flags.run_env import ENV_FIELD, parse_env_text
from tui.domain.flags.secrets import split_secrets
from tui.domain.flags.serve import ServeFlags, flag_specs, validated
from tui.domain.flags.serve_rules import quantization_problems
from tui.domain.flags.spec import FlagKind, FlagSpec
from tui.domain.flags.vllm_cli import VllmCli
from tui.domain.flags.vllm_defaults import PERFORMANCE_MODE
from tui.domain.flags.vllm_tables import VllmTable, default_cli, series, table_for
from tui.domain.preflight import DeviceMemory
from tui.domain.vllm_release import VllmRelease, release, release_of


@dataclass(frozen=True)
class ModelFacts:
    """What vLLM checks the flags against in a model's ``config.json``.

    ``checkpoint_quantization``: its ``quantization_config.quant_method`` (``None``: an
    unquantized checkpoint).
    """

    attention_heads: int
    checkpoint_quantization: str | None = None


@dataclass(frozen=True)
class ValidationContext:
    """What the caller knows besides the flags; every part is optional.

    ``cli``: the installed vLLM's introspected parser; without it ``installed`` (the
    installed vLLM's version, when known) picks the shipped table of that version, and with
    neither the newest table is used (:func:`tui.domain.flags.vllm_tables.table_for`).
    ``device``: the device a launch will use (vLLM derives its batch limits from it);
    ``model``: the model's facts; ``performance_mode``: when not given in the extra arguments.
    """

    cli: VllmCli | None = None
    device: DeviceMemory | None = None
    model: ModelFacts | None = None
    performance_mode: str = PERFORMANCE_MODE
    installed: str | None = None

    @property
    def table(self) -> VllmTable:
        """The shipped table for this vLLM (the introspected one's version, else installed)."""
        return table_for(self.cli.version if self.cli is not None else self.installed)

    @property
    def release(self) -> VllmRelease:
        """The release record of this vLLM (the table's when no version is known)."""
        version = self.cli.version if self.cli is not None else self.installed
        return release_of(version if version and release(version) else self.table.version)

    @property
    def parser(self) -> VllmCli:
        """The parser table the checks use."""
        return self.cli if self.cli is not None else self.table.cli

    def _same_series(self) -> bool:
        return self.cli is None or series(self.cli.version) == series(self.table.version)

    @property
    def bounds(self) -> Mapping[str, tuple[str, Mapping[str, float]]]:
        """The config ranges of this vLLM's version (none known for a version vtc lacks)."""
        return self.table.bounds if self._same_series() else {}

    @property
    def literals(self) -> Mapping[str, tuple[str, Mapping[str, tuple[str, ...]]]]:
        """The allowed values of the JSON config options' fields of this vLLM's version."""
        return self.table.literals if self._same_series() else {}


_NO_CONTEXT = ValidationContext()


# -- checks on a ServeFlags ---------------------------------------------------------------------
def check_flags(flags: ServeFlags, context: ValidationContext | None = None) -> list[FlagProblem]:
    """Every problem vLLM would find in ``flags`` that ``ServeFlags`` itself cannot see."""
    ctx = context or _NO_CONTEXT
    extra = extra_args_problems(
        flags.extra_args, ctx.parser, bounds=ctx.bounds, literals=ctx.literals
    )
    problems = list(extra.problems)
    problems += _device_problems(flags, ctx, extra.values.get("performance_mode"))
    problems += _release_problems(flags, ctx)
    problems += _model_problems(flags, ctx)
    return problems


def _release_problems(flags: ServeFlags, ctx: ValidationContext) -> list[FlagProblem]:
    """The rules of the release that will serve (its quantization methods)."""
    q = flags.quantization
    methods = ctx.release.quantization
    return [
        FlagProblem("quantization", message.removeprefix("quantization: "), "--quantization", q)
        for message in quantization_problems(q, flags.extra_args, methods)
        if q is not None
    ]


def ensure_valid(flags: ServeFlags, context: ValidationContext | None = None) -> ServeFlags:
    """``flags`` if vLLM would accept them, else :class:`FlagError` (the launch gate)."""
    problems = check_flags(flags, context)
    if problems:
        raise FlagError(problems)
    return flags


def _device_problems(flags: ServeFlags, ctx: ValidationContext, mode: Any) -> list[FlagProblem]:
    """vLLM's derived token budget against an explicit ``max_num_seqs``.

    ``engine/arg_utils.py:3097-3186`` (reference 1.4): with ``max_num_batched_tokens`` unset,
    vLLM derives ``min(max_num_seqs * max_model_len, D)`` where ``D`` is the device's default
    (x2 in throughput mode, at least ``max_model_len`` without chunked prefill); that is
    below ``max_num_seqs`` exactly when ``D`` is.
    """
    device = ctx.device
    mns = flags.max_num_seqs
    if device is None or mns is None or flags.max_num_batched_tokens is not None:
        return []
    world = (flags.tensor_parallel_size or 1) * (flags.pipeline_parallel_size or 1)
    defaults = budget.batch_defaults(device.total_bytes, device.name, device.kind, world)
    performance = mode if isinstance(mode, str) else ctx.performance_mode
    derived = defaults.max_num_batched_tokens * (2 if performance == "throughput" else 1)
    if flags.enable_chunked_prefill is False:
        mml = flags.max_model_len
        if mml is None or mml < 1:
            return []  # the budget is at least the model's length, not known here
        derived = max(mml, derived)
    if derived >= mns:
        return []
    return [
        FlagProblem(
            "max_num_seqs",
            f"max_num_batched_tokens ({derived}) must be greater than or equal to "
            f"max_num_seqs ({mns}). (max_num_batched_tokens is not set: vLLM derives {derived} "
            "on this device)",
            "--max-num-seqs",
            str(mns),
        )
    ]


def _model_problems(flags: ServeFlags, ctx: ValidationContext) -> list[FlagProblem]:
    model = ctx.model
    if model is None:
        return []
    problems: list[FlagProblem] = []
    tp = flags.tensor_parallel_size or 1
    if model.attention_heads % tp:
        # config/model.py:1546-1551, its words
        problems.append(
            FlagProblem(
                "tensor_parallel_size",
                f"Total number of attention heads ({model.attention_heads}) must be divisible "
                f"by tensor parallel size ({tp}).",
                "--tensor-parallel-size",
                str(tp),
            )
        )
    q = flags.quantization
    needs_checkpoint = ctx.release.quantization.needs_checkpoint
    if q in needs_checkpoint and model.checkpoint_quantization is None:
        problems.append(
            FlagProblem(
                "quantization",
                f"Cannot find the config file for {q} (the checkpoint is not quantized)",
                "--quantization",
                q,
            )
        )
    return problems


# -- the sources --------------------------------------------------------------------------------
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
        """Validate into ``ServeFlags``; :class:`ArgvError` (a ``FlagError``) if refused."""
        data: dict[str, Any] = dict(self.values)
        data["model"] = self.model or ""
        data["extra_args"] = self.extra
        try:
            return validated(data)
        except FlagError as exc:
            raise ArgvError(list(exc.problems)) from None


def parse_serve_argv(argv: Sequence[str], *, last_wins: bool = True) -> ParsedServeArgs:
    """Parse ``[vllm] [serve] MODEL [flags...]`` like vLLM's ``FlexibleArgumentParser``.

    Accepts ``_`` or ``-`` in names, ``--flag=value``, ``--no-flag`` for booleans, the short
    aliases and unambiguous abbreviations. Options that are not declared are kept verbatim
    in ``extra`` with their values. ``last_wins``: a flag given twice takes the last value,
    as vLLM does (vtc's own path, :func:`flags_from_argv`, refuses it). Raises
    :class:`ArgvError` for bad values.
    """
    split = split_declared(
        strip_program(argv), flag_specs(), default_cli(), take_model=True, last_wins=last_wins
    )
    if split.problems:
        raise ArgvError(split.problems)
    values = {k: v for k, v in split.values.items() if v is not None}
    return ParsedServeArgs(model=split.model, values=values, extra=tuple(split.rest))


def flags_from_argv(
    argv: Sequence[str], context: ValidationContext | None = None, *, model: str | None = None
) -> ServeFlags:
    """A ``vllm serve`` command line (``vtc -- serve ...``, a sweep) as valid ``ServeFlags``.

    ``model`` replaces the command line's MODEL. Secrets are refused here: take them out
    first with :func:`serve_command` (or :func:`tui.domain.flags.secrets.split_secrets`).
    """
    parsed = parse_serve_argv(argv, last_wins=False)
    data: dict[str, Any] = {**parsed.values, "extra_args": parsed.extra}
    data["model"] = model or parsed.model or ""
    if not data["model"]:
        raise FlagError.of(
            "No model specified! Please specify model either as a positional argument or in "
            "a config file.",  # utils/argparse_utils.py:542-546, vLLM's words
            field="model",
        )
    return ensure_valid(validated(data), context)


@dataclass(frozen=True)
class ServeCommand:
    """A serve command line made safe to store: its flags, and its secrets as environment."""

    flags: ServeFlags
    env: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def serve_command(
    argv: Sequence[str], context: ValidationContext | None = None, *, model: str | None = None
) -> ServeCommand:
    """``vtc -- serve ...``: secrets moved into ``env`` (``VLLM_API_KEY``...), the rest
    validated. Raises :class:`FlagError`."""
    split = split_secrets(list(argv), (context or _NO_CONTEXT).cli)
    flags = flags_from_argv(split.argv, context, model=model)
    return ServeCommand(flags, split.env, split.notes)


def validate_form(
    model: str,
    raw: Mapping[str, str],
    extra: str = "",
    context: ValidationContext | None = None,
    env: str = "",
) -> tuple[ServeFlags | None, list[FlagProblem]]:
    """Validate the console form's text fields into ``ServeFlags``.

    Empty text means "not set"; ``env`` is the environment field's ``NAME=value`` words
    (:func:`tui.domain.flags.run_env.parse_env_text`). Returns the flags, or ``None`` with
    every problem found (type errors first, then range and cross-field errors, so the
    operator fixes them in one pass).
    """
    values: dict[str, Any] = {}
    problems: list[FlagProblem] = []
    specs = {s.name: s for s in flag_specs()}
    for name, text in raw.items():
        spec = specs.get(name)
        if spec is None:
            problems.append(FlagProblem(None, f"{name}: not a flag of the form"))
            continue
        try:
            value = spec.parse(str(text if text is not None else ""))
        except ArgvError as exc:
            problems.extend(FlagProblem(name, p.message) for p in exc.problems)
            continue
        if value is not None:
            values[name] = value
    extra_args = _split_extra(extra, problems)
    env_pairs, env_refused = parse_env_text(env)
    problems += [FlagProblem(ENV_FIELD, p) for p in env_refused]
    if problems:
        return None, problems
    try:
        flags = validated({"model": model, **values, "extra_args": extra_args, "env": env_pairs})
    except FlagError as exc:
        return None, list(exc.problems)
    checked = check_flags(flags, context)
    return (None, checked) if checked else (flags, [])


def flags_from_form(
    model: str,
    raw: Mapping[str, str],
    extra: str = "",
    context: ValidationContext | None = None,
    env: str = "",
) -> ServeFlags:
    """:func:`validate_form`, raising :class:`FlagError` instead of returning problems."""
    flags, problems = validate_form(model, raw, extra, context, env)
    if flags is None:
        raise FlagError(problems)
    return flags


def _split_extra(extra: str, problems: list[FlagProblem]) -> tuple[str, ...]:
    if not extra.strip():
        return ()
    try:
        return tuple(shlex.split(extra))
    except ValueError as exc:  # an unclosed quote
        problems.append(FlagProblem("extra_args", f"extra args: {exc}"))
        return ()


def flags_from_values(
    values: Mapping[str, Any],
    context: ValidationContext | None = None,
    *,
    origin: str = "",
) -> ServeFlags:
    """Typed values (a preset's ``[flags]``, a ``--config`` file, a fix) as ``ServeFlags``.

    Types are strict, as the file wrote them: an integer flag takes an integer (or, for
    vLLM's human-readable ones, text such as ``"20G"``), a boolean only ``true``/``false``,
    a float a number; ``extra_args`` a list of strings. ``origin`` prefixes each message.
    """
    problems: list[FlagProblem] = []
    data: dict[str, Any] = {}
    specs = {s.name: s for s in flag_specs()}
    for name, value in values.items():
        spec = specs.get(name)
        if spec is None or value is None:
            data[name] = value  # model, extra_args, or an unknown key: ServeFlags says so
            continue
        typed = _strict(spec, value, problems)
        if typed is not None:
            data[name] = typed
    if "extra_args" in data:
        data["extra_args"] = _strict_extra(data["extra_args"], problems)
    if not problems:
        try:
            return ensure_valid(validated(data), context)
        except FlagError as exc:
            problems = list(exc.problems)
    if origin:
        problems = [FlagProblem(p.field, f"{origin}: {p.line}") for p in problems]
    raise FlagError(problems)


def _strict(spec: FlagSpec, value: Any, problems: list[FlagProblem]) -> Any:
    """``value`` if its type is the flag's, else ``None`` with a problem."""
    kind = spec.kind
    ok = {
        FlagKind.BOOL: isinstance(value, bool),
        FlagKind.INT: isinstance(value, int) and not isinstance(value, bool),
        FlagKind.FLOAT: isinstance(value, int | float) and not isinstance(value, bool),
        FlagKind.CHOICE: isinstance(value, str),
        FlagKind.STR: isinstance(value, str),
    }[kind]
    if ok:
        return float(value) if kind is FlagKind.FLOAT else value
    if kind is FlagKind.INT and isinstance(value, str) and (spec.human or spec.auto):
        try:
            return spec.parse_arg(value)
        except ArgvError as exc:
            problems.extend(FlagProblem(spec.name, p.message) for p in exc.problems)
            return None
    expected = {
        FlagKind.BOOL: "true or false",
        FlagKind.INT: "an integer" + (' (or text such as "20G")' if spec.human else ""),
        FlagKind.FLOAT: "a number",
        FlagKind.CHOICE: "text, one of " + ", ".join(spec.choices or ()),
        FlagKind.STR: "text",
    }[kind]
    problems.append(
        FlagProblem(
            spec.name, f"expected {expected}, got {type_word(value)}", spec.cli, repr(value)
        )
    )
    return None


def _strict_extra(value: Any, problems: list[FlagProblem]) -> Any:
    if isinstance(value, list | tuple) and all(isinstance(t, str) for t in value):
        return tuple(value)
    problems.append(FlagProblem("extra_args", "extra_args: expected a list of strings"))
    return ()


def type_word(value: Any) -> str:
    """What a file's value is, in the words a message uses ("a number", "a table"...)."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def apply_changes(
    flags: ServeFlags, changes: Mapping[str, Any], context: ValidationContext | None = None
) -> ServeFlags:
    """``flags`` with ``changes`` (a diagnosis fix, a sweep step) applied and checked.

    ``None`` unsets a flag. Raises :class:`FlagError`.
    """
    return ensure_valid(flags.replace(**dict(changes)), context)
