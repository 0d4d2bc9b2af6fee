"""Import and export the YAML file that ``vllm serve --config FILE`` reads.

vLLM turns each ``key: value`` of the file into argv (``FlexibleArgumentParser.
load_config_file``, ``utils/argparse_utils.py:570-634``; reference 1.2), inserted right after
``serve MODEL`` so the command line wins over the file:

=========  ==================================================================
``true``   ``--key``
``false``  ``--no-key`` only if the *top-level* ``vllm`` parser has that option
list       ``--key v1 v2 ...`` (``str()`` of each item; an empty list is dropped)
dict       ``--key '<json.dumps>'`` (one token)
other      ``--key str(value)`` (``null`` becomes ``"None"``)
=========  ==================================================================

Keys may use ``_`` or ``-`` (the parser rewrites ``_`` later); ``model:`` gives the model when
the command line has none.

Verified on vLLM 0.32.0: for ``vllm serve`` the ``--no-key`` lookup runs on the top-level
``vllm`` parser, which only has ``-h/--help`` and ``-v/--version``, so **every ``false`` is
silently dropped**: ``enable-prefix-caching: false`` leaves prefix caching on. The import
therefore keeps the operator's intent where the flag has a ``--no-`` form (declared boolean
flags, or ``boolean_optional`` flags of an introspected :class:`VllmCli`) and says so in its
notes; the export writes ``no-key: true`` instead of ``key: false``, which vLLM does honour.

Pure: text in, text out (PyYAML's ``safe_load``/``safe_dump``, as vLLM uses ``safe_load``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from tui.domain.flags.argv import lex, looks_like_option
from tui.domain.flags.humanint import format_human_bytes
from tui.domain.flags.problems import FlagError, FlagProblem
from tui.domain.flags.secrets import SECRET_FLAGS
from tui.domain.flags.serve import ServeFlags, flag_specs, validated
from tui.domain.flags.spec import FlagKind, FlagSpec
from tui.domain.flags.validation import ValidationContext, ensure_valid
from tui.domain.flags.vllm_cli import VllmCli
from tui.domain.flags.vllm_tables import default_cli
from tui.domain.json_text import loads_json

# Declared flags whose vLLM option takes several values (nargs "+"); ServeFlags holds one.
_MULTI_VALUE = frozenset({"served_model_name"})
_NO_MODEL = (
    "No model specified! Please specify model either as a positional argument or in a "
    "config file."
)  # vLLM's words, utils/argparse_utils.py:542-546
_INT = re.compile(r"-?\d+")
MAX_CONFIG_BYTES = 1 << 20
"""A config file larger than this is refused unread (vLLM's own are a few hundred bytes)."""


class ConfigYamlError(FlagError):
    """A config file vtc cannot import; each problem names the offending key as written."""

    def __init__(self, problems: str | Sequence[FlagProblem]) -> None:
        if isinstance(problems, str):
            problems = [FlagProblem(None, problems)]
        super().__init__(problems)


@dataclass(frozen=True)
class ConfigImport:
    """A config file as ``ServeFlags``.

    ``notes`` say where the result differs from a literal ``vllm serve --config FILE``
    (dropped ``false`` values, secrets moved out of argv). ``secret_env`` holds
    ``api-key``/``hf-token`` values under the environment variable vLLM reads instead.
    """

    flags: ServeFlags
    notes: tuple[str, ...] = ()
    secret_env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ConfigExport:
    """A config file's text, and what could not be written into it (argv tokens + why)."""

    text: str
    left_out: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


# -- vLLM's own expansion ----------------------------------------------------------------------
def vllm_config_args(config: Mapping[str, Any]) -> list[str]:
    """The argv ``vllm serve --config`` makes of ``config`` (vLLM 0.32.0, ``false`` dropped).

    A literal mirror of ``load_config_file`` as ``vllm serve`` runs it, ``model`` included
    (as ``--model``), for showing the operator exactly what the file means to vLLM.
    """
    args: list[str] = []
    for key, value in config.items():
        args.extend(_expand(str(key), value, negation=None))
    return args


def _expand(key: str, value: Any, negation: str | None) -> list[str]:
    """One entry as argv; ``negation`` is the ``--no-`` option to use for ``false``."""
    if isinstance(value, bool):
        if value:
            return ["--" + key]
        return [negation] if negation else []
    if isinstance(value, list):
        return ["--" + key, *(str(item) for item in value)] if value else []
    if isinstance(value, dict):
        return ["--" + key, json.dumps(value)]
    return ["--" + key, str(value)]


# -- import --------------------------------------------------------------------------------------
MAX_YAML_DEPTH = 64
"""How deep a config file's lists and mappings may nest (a flag's JSON value is 3 or 4)."""


def _check_shape(text: str) -> None:
    """Refuse, from PyYAML's event stream (read without recursion), what would make
    ``safe_load`` recurse past Python's limit or a walk of the result never end: nesting
    past :data:`MAX_YAML_DEPTH`, and aliases (``*a``), which an "alias bomb" nests nine
    times nine times... into a tree of billions of nodes. A flag file needs neither."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise ConfigYamlError("an alias (*name): a config file's values are written out")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise ConfigYamlError(f"nested deeper than {MAX_YAML_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def load_config_mapping(text: str) -> dict[str, Any]:
    """``yaml.safe_load`` of a config file, checked to be a mapping with text keys."""
    try:
        _check_shape(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigYamlError(f"not valid YAML: {exc}") from exc
    if data is None:
        raise ConfigYamlError("the config file is empty: expected a mapping of flag: value")
    if not isinstance(data, dict):
        raise ConfigYamlError(
            "a vLLM config file must be a mapping of flag: value, "
            f"got a {_yaml_type(data)} at the top level"
        )
    for key in data:
        if not isinstance(key, str):
            raise ConfigYamlError(f"key {key!r}: flag names must be text")
        if key.startswith("-"):
            raise ConfigYamlError(
                f"key {key!r}: write flag names without leading dashes "
                f"({key.lstrip('-')!r}); vLLM adds '--' itself"
            )
        if not key.strip():
            raise ConfigYamlError("an empty key: flag names must be text")
        if (path := _non_finite(data[key])) is not None:
            where = ".".join([key, *path])
            raise ConfigYamlError(
                f"{where}: not a finite number (.nan and .inf are no value vLLM can use, and "
                "a JSON value cannot hold them)"
            )
    return data


def _non_finite(value: Any) -> list[str] | None:
    """The path inside ``value`` (a YAML value, nested at most :data:`MAX_YAML_DEPTH`) to a
    float that is NaN or infinite (``[]``: ``value`` itself); ``None`` when there is none."""
    if isinstance(value, float):
        return None if math.isfinite(value) else []
    items: Iterable[tuple[object, Any]] = ()
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    for name, item in items:
        inner = _non_finite(item)
        if inner is not None:
            return [str(name), *inner]
    return None


@dataclass
class _Reading:
    """What the keys of one file said, while they are read."""

    values: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)  # declared name -> its YAML key
    extra: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    secrets: dict[str, str] = field(default_factory=dict)
    problems: list[FlagProblem] = field(default_factory=list)
    model: str | None = None


def import_config_yaml(
    text: str,
    *,
    model: str | None = None,
    cli: VllmCli | None = None,
    context: ValidationContext | None = None,
) -> ConfigImport:
    """A ``vllm serve --config`` YAML file as :class:`ConfigImport`, through the one
    validation path (:mod:`tui.domain.flags.validation`).

    ``model`` is the positional MODEL of a command line, which beats the file's ``model:``
    (vLLM's precedence). Declared flags are matched by name with ``_`` or ``-`` and by the
    abbreviations vLLM accepts (with ``cli``, the installed parser; else vLLM 0.32's);
    everything else becomes ``extra_args`` expanded as vLLM expands it and checked against
    that parser. Raises :class:`ConfigYamlError` naming each key as written.
    """
    data = load_config_mapping(text)
    parser = cli or (context.parser if context else default_cli())
    reading = _Reading()
    for key, value in data.items():
        _read_key(reading, key, value, parser)
    chosen = model if model else reading.model
    if not chosen:
        raise ConfigYamlError(_NO_MODEL)
    if reading.problems:
        raise ConfigYamlError(reading.problems)
    ctx = context or ValidationContext()
    ctx = ValidationContext(parser, ctx.device, ctx.model, ctx.performance_mode)
    try:
        flags = validated({"model": chosen, **reading.values, "extra_args": tuple(reading.extra)})
        ensure_valid(flags, ctx)
    except FlagError as exc:
        raise ConfigYamlError([_by_key(p, reading.origin) for p in exc.problems]) from None
    return ConfigImport(flags=flags, notes=tuple(reading.notes), secret_env=reading.secrets)


def _by_key(problem: FlagProblem, origin: Mapping[str, str]) -> FlagProblem:
    """The problem named after the YAML key it came from."""
    if problem.field not in origin:
        return problem  # extra arguments and cross-field rules read well as they are
    where = origin[problem.field or ""]
    message = problem.message if problem.flag is None else problem.line
    if problem.flag is not None:
        return FlagProblem(problem.field, problem.line.replace(problem.flag, where, 1))
    return FlagProblem(problem.field, f"{where}: {message}")


def _read_key(reading: _Reading, key: str, value: Any, parser: VllmCli) -> None:
    norm = key.replace("_", "-")
    if norm == "model":
        reading.model = _model_value(key, value)
        return
    secret = _secret_option(norm, parser)
    if secret is not None:
        _read_secret(reading, key, value, secret)
        return
    if norm == "config":
        reading.notes.append(f"{key}: a nested config file is ignored by vLLM; dropped")
        return
    spec, negated = _declared_for(norm, _declared_index(), parser)
    if spec is None:
        reading.extra.extend(_extra_tokens(key, value, parser, reading.notes))
        return
    try:
        parsed = _declared_value(key, spec, value, negated, reading.notes)
    except ConfigYamlError as exc:
        reading.problems.extend(exc.problems)
        return
    if parsed is _AS_EXTRA:
        reading.extra.extend(_expand(key, value, None))
    elif parsed is not _UNSET:
        if spec.name in reading.values:
            reading.problems.append(
                FlagProblem(
                    spec.name,
                    f"{key}: also given as {reading.origin[spec.name]!r}; vLLM would use the "
                    "later one silently: keep one",
                )
            )
            return
        reading.values[spec.name] = parsed
        reading.origin[spec.name] = key


def _secret_option(norm: str, parser: VllmCli) -> str | None:
    option = "--" + norm
    if option in SECRET_FLAGS:
        return option
    res = parser.resolve(option)
    return res.option if res.status == "known" and res.option in SECRET_FLAGS else None


def _read_secret(reading: _Reading, key: str, value: Any, option: str) -> None:
    spec = SECRET_FLAGS[option]
    if spec.env is None:
        reading.problems.append(
            FlagProblem(
                "extra_args",
                f"{key}: carries a secret key and vLLM reads it only from the command line, "
                "where any user sees it (ps); vtc does not launch it",
            )
        )
        return
    if spec.value_optional and value is True:
        reading.extra.append(option)  # a bare --hf-token: the stored login, no secret
        return
    try:
        secret = _secret_value(key, value, reading.notes)
    except ConfigYamlError as exc:
        reading.problems.extend(exc.problems)
        return
    if secret:
        reading.secrets[spec.env] = secret
        reading.notes.append(f"{key}: not passed on the command line; set as {spec.env} instead")


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_UNSET = _Marker("UNSET")
_AS_EXTRA = _Marker("AS_EXTRA")


def _declared_index() -> dict[str, FlagSpec]:
    """Declared flags by every long spelling, dashed and without the leading ``--``."""
    index: dict[str, FlagSpec] = {}
    for spec in flag_specs():
        index[spec.name.replace("_", "-")] = spec
        for spelling in spec.spellings:
            if spelling.startswith("--"):
                index[spelling[2:].replace("_", "-")] = spec
    return index


def _declared_for(
    norm: str, index: Mapping[str, FlagSpec], cli: VllmCli
) -> tuple[FlagSpec | None, bool]:
    """The declared flag a (dashed) key sets, and whether it is its ``no-`` form."""
    if "." in norm:
        return None, False  # dotted JSON keys address part of a JSON flag
    if norm in index:
        return index[norm], False
    if norm.startswith("no-") and norm[3:] in index and index[norm[3:]].kind is FlagKind.BOOL:
        return index[norm[3:]], True
    resolution = cli.resolve("--" + norm)
    if resolution.status == "known" and resolution.flag is not None:
        by_dest = {s.name: s for s in flag_specs()}
        spec = by_dest.get(resolution.flag.dest)
        if spec is not None:
            return spec, resolution.flag.is_negative(resolution.option)
    return None, False


def _declared_value(key: str, spec: FlagSpec, value: Any, negated: bool, notes: list[str]) -> Any:
    if value is None:
        notes.append(f"{key}: null leaves vLLM's default")
        return _UNSET
    if spec.kind is FlagKind.BOOL:
        if not isinstance(value, bool):
            raise ConfigYamlError(f"{key}: expected true or false, got {_show(value)}")
        if negated:
            if not value:
                notes.append(f"{key}: false is ignored by vLLM; dropped")
                return _UNSET
            return False
        if not value:
            notes.append(
                f"{key}: false is silently ignored by `vllm serve --config` (vLLM 0.32); "
                f"vtc passes --no-{spec.cli[2:]} explicitly"
            )
        return value
    if isinstance(value, bool):
        raise ConfigYamlError(f"{key}: expected a value, got {_show(value)}")
    if isinstance(value, dict):
        raise ConfigYamlError(f"{key}: expected a single value, got a mapping")
    if isinstance(value, list):
        if len(value) == 1 and not isinstance(value[0], (list, dict)):
            value = value[0]
        elif spec.name in _MULTI_VALUE and value:
            return _AS_EXTRA  # several names: keep vLLM's own nargs="+" expansion
        else:
            raise ConfigYamlError(
                f"{key}: expected a single value, got a list of {len(value)} items"
            )
    try:
        return spec.parse_arg(str(value))  # vLLM expands a value with str() (reference 1.2)
    except FlagError as exc:
        message = exc.problems[0].message.removeprefix(f"argument {spec.argparse_name}: ")
        raise ConfigYamlError([FlagProblem(spec.name, f"{key}: {message}")]) from None


def _extra_tokens(key: str, value: Any, cli: VllmCli, notes: list[str]) -> list[str]:
    if value is False:
        negation = _negation(key, cli)
        if negation is None:
            notes.append(f"{key}: false is ignored by vLLM; dropped")
            return []
        notes.append(
            f"{key}: false is silently ignored by `vllm serve --config` (vLLM 0.32); "
            f"vtc passes {negation} explicitly"
        )
        return [negation]
    if isinstance(value, list) and not value:
        notes.append(f"{key}: an empty list is dropped by vLLM")
    return _expand(key, value, None)


def _negation(key: str, cli: VllmCli) -> str | None:
    option = "--no-" + key.replace("_", "-")
    flag = cli.flag(option)
    # vLLM's config reader writes "--no-KEY" for false when the parser registers it (0.33
    # keeps it registered, hidden, beside --disable-x: utils/argparse_utils.py:657).
    return option if flag is not None and flag.is_negative(option) else None


def _model_value(key: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigYamlError(f"{key}: expected a model name or path, got {_show(value)}")
    text = str(value).strip()
    if not text:
        raise ConfigYamlError(f"{key}: the model name is empty")
    return text


def _secret_value(key: str, value: Any, notes: list[str]) -> str | None:
    if isinstance(value, list):
        if len(value) > 1:
            notes.append(f"{key}: only the first of {len(value)} values is kept")
        value = value[0] if value else None
    if value is None:
        return None
    if isinstance(value, (dict, list, bool)):
        raise ConfigYamlError(f"{key}: expected text, got {_show(value)}")
    return str(value)


def _yaml_type(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "number"
    return "string" if isinstance(value, str) else type(value).__name__


def _show(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return f"a {_yaml_type(value)}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return repr(value)


# -- export ----------------------------------------------------------------------------------------
def export_config_yaml(
    flags: ServeFlags, *, cli: VllmCli | None = None, include_model: bool = True
) -> ConfigExport:
    """``flags`` as a ``vllm serve --config`` file (``model:`` first, set flags, extra args).

    Extra args are parsed back into keys: ``--key`` -> ``key: true``, ``--key v`` ->
    ``key: v``, ``--key v1 v2`` -> a list, a JSON object -> a mapping; numbers and JSON are
    written typed only when ``str()``/``json.dumps`` gives the same token back. Short options
    (``-tp 2``, ``-O3``) get their long name from ``cli`` (default: vLLM 0.32's parser).
    Secrets and anything a key cannot express land in ``left_out`` with a note.
    """
    cli = cli or default_cli()
    doc: dict[str, Any] = {}
    notes: list[str] = []
    left_out: list[str] = []
    if include_model:
        doc["model"] = flags.model
    for spec in flag_specs():
        value = getattr(flags, spec.name)
        if value is None:
            continue
        key = spec.cli[2:]
        if spec.kind is FlagKind.BOOL:
            # `key: false` is dropped by vllm serve --config; `no-key: true` is honoured.
            doc[key if value else "no-" + key] = True
        elif spec.human and spec.name.endswith("_bytes") and isinstance(value, int):
            human = format_human_bytes(value)
            doc[key] = value if human == str(value) else human
        else:
            doc[key] = value
    for option, values in _group_extra(flags.extra_args, left_out, notes):
        exported = _export_key(option, values, cli)
        if exported is None:
            left_out.extend([option, *values])
            notes.append(f"{option}: not an option vLLM's parser knows; cannot become a key")
            continue
        key, values = exported
        if any(_is_option(v) for v in values):
            # only an inline --key=-x can carry this; as a YAML value vLLM would emit
            # "--key -x", which argparse reads as two options
            left_out.extend([option, *values])
            notes.append(f"{option}: a value starting with '-' must stay on the command line")
            continue
        secret = SECRET_FLAGS.get("--" + key.replace("_", "-"))
        if secret is not None:
            left_out.append(option)
            where = f"set {secret.env} instead" if secret.env else "it carries a secret"
            notes.append(f"{option}: a secret; left out of the file ({where})")
            continue
        if _clashes(key, doc):
            left_out.extend([option, *values])
            notes.append(f"{option}: given twice; a YAML key can hold it once")
            continue
        doc[key] = _typed(values)
    header = "# vllm serve --config FILE (written by vtc)\n"
    text = header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100)
    return ConfigExport(text=text, left_out=tuple(left_out), notes=tuple(notes))


def _group_extra(
    tokens: Sequence[str], left_out: list[str], notes: list[str]
) -> list[tuple[str, list[str]]]:
    """``extra_args`` as (option, values) pairs; stray leading values are left out."""
    groups: list[tuple[str, list[str]]] = []
    for token in lex(tokens):
        if token.option is not None:
            name, eq, inline = token.text.partition("=")
            groups.append((name, [inline] if eq else []))
        elif groups:
            groups[-1][1].append(token.text)
        else:
            left_out.append(token.text)
            notes.append(f"{token.text!r}: a value without a flag cannot become a key")
    return groups


def _is_option(token: str) -> bool:
    return looks_like_option(token)


def _export_key(option: str, values: list[str], cli: VllmCli) -> tuple[str, list[str]] | None:
    """The YAML key for ``option`` (and its values, adjusted for ``-O3``)."""
    if option.startswith("--"):
        return option[2:], values
    if option.startswith("-O") and option != "-O":
        inline = option[3:] if option[2:3] == "=" else option[2:]
        return "optimization-level", [inline, *values]
    head, dot, tail = option.partition(".")
    flag = cli.flag(head)
    if flag is None or head not in flag.option_strings:
        return None
    return flag.name[2:] + dot + tail, values


def _clashes(key: str, doc: Mapping[str, Any]) -> bool:
    dashed = key.replace("_", "-")
    return any(k.replace("_", "-") == dashed for k in doc)


def _typed(values: list[str]) -> Any:
    """YAML value for argv values: true for none, a scalar for one, a list for several."""
    if not values:
        return True
    if len(values) == 1:
        return _typed_one(values[0], allow_json=True)
    # list items are expanded with str(), which is not JSON for a mapping: keep those text
    return [_typed_one(v, allow_json=False) for v in values]


def _typed_one(token: str, *, allow_json: bool) -> Any:
    # Typed only when vLLM's str()/json.dumps() of the typed value gives the token back.
    if _INT.fullmatch(token) and str(int(token)) == token:
        return int(token)
    try:
        number = float(token)
        if str(number) == token:
            return number
    except ValueError:
        pass
    if allow_json and token.startswith("{"):
        try:
            parsed = loads_json(token)
        except ValueError:
            return token
        if isinstance(parsed, dict) and json.dumps(parsed) == token:
            return parsed
    return token
