"""The simulator's command line: every flag of the simulated vLLM's ``vllm serve``, and ``--sim-*``.

``vtc-sim serve MODEL [flags]`` is read the way vLLM's ``FlexibleArgumentParser`` reads it
(reference 1.1): the option table is vLLM's own (:mod:`tui.sim.vllm_flags`, 318 actions),
``_`` or ``-`` in names, ``--x=value``, ``--no-x``, unambiguous prefixes, short aliases
(``-tp 2``, ``-qawq``), ``-O3``, dotted JSON keys (``-cc.mode=none``) and ``--config
FILE.yaml`` (expanded as vLLM expands it, after the model). Values of the flags the console
declares (:class:`~tui.domain.flags.serve.ServeFlags`) are typed by the console's own
:meth:`FlagSpec.parse`, so both sides agree on them; every other flag is typed by its
argparse ``type=``/``choices``/``nargs`` and kept by ``dest`` in :class:`FrontendOptions`.
Some of those change the simulator's behaviour (``--api-key``, ``--disable-log-stats``,
``--enable-log-requests``, ``--enable-mfu-metrics``, the LoRA flags, ...); the rest are
accepted and ignored, as a drop-in must. Errors are argparse's: ``vllm: error:
unrecognized arguments: ...`` for unknown tokens, ``vllm serve: error: argument ...`` for
bad values, exit 2.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.domain.flags.config_yaml import ConfigYamlError, load_config_mapping, vllm_config_args
from tui.domain.flags.serve import ArgvError, FlagKind, FlagSpec, flag_specs
from tui.domain.flags.validation import ParsedServeArgs
from tui.domain.flags.vllm_cli import CliFlag, Resolution, VllmCli
from tui.domain.flags.vllm_tables import series
from tui.domain.json_text import loads_json
from tui.domain.profile import Profile, ProfileError
from tui.sim.catalog import DEFAULT_GPU, GpuSpec, UnknownGpuError, resolve_gpu
from tui.sim.versions import (
    DEFAULT_SIM_VLLM_VERSION,
    RUNNER_V2_ENV,
    SIM_HOSTS,
    SIM_VLLM_VERSIONS,
    check_sim_version,
    uses_model_runner_v2,
)
from tui.sim.vllm_flags import (
    action_name,
    arity,
    expected_message,
    serve_cli,
    values_for,
)
from tui.store.profiles import load_profile

UVICORN_LEVELS = ("critical", "debug", "error", "info", "trace", "warning")


class UnrecognizedArgs(ArgvError):
    """Tokens vLLM's parser would not recognise (``vllm: error: unrecognized arguments``)."""

    def __init__(self, tokens: list[str]) -> None:
        super().__init__("unrecognized arguments: " + " ".join(tokens))
        self.tokens = tokens


@dataclass(frozen=True)
class FixedTiming:
    """Injected delays (``--sim-fixed-ttft-ms``/``--sim-fixed-itl-ms``), wall-clock seconds.

    Every streamed sequence gets its first token ``ttft_s`` after its request arrived and
    then one every ``itl_s``, however many requests run: the scheduler, KV cache and cost
    model are bypassed (and ``--sim-speed`` does not apply). Made for benchmarking load
    clients against known delays.
    """

    ttft_s: float = 0.0
    itl_s: float = 0.0

    def offset(self, k: int) -> float:
        """Seconds from arrival to token ``k`` (0-based)."""
        return self.ttft_s + k * self.itl_s


@dataclass(frozen=True)
class SimOptions:
    """``--sim-*`` options: the simulated machine and time scale."""

    gpu: GpuSpec
    num_gpus: int = 1
    speed: float = 1.0
    gpu_used_bytes: int = 0
    seed: int = 0
    fixed: FixedTiming | None = None  # injected fixed delays instead of the cost model
    vllm_version: str = DEFAULT_SIM_VLLM_VERSION  # --sim-vllm-version: the vLLM it speaks
    host: str = "linux"  # --sim-host: wsl2 offers no UVA (model runner V2 cannot start)
    runner_v2: bool = False  # model runner V2 in use: the version's default or the variable
    profile: Profile | None = None  # --sim-profile: the twin of a calibrated server


@dataclass(frozen=True)
class LoraModule:
    """One ``--lora-modules`` entry (vLLM's ``LoRAModulePath``)."""

    name: str
    path: str
    base_model_name: str | None = None

    def __repr__(self) -> str:
        return (
            f"LoRAModulePath(name={self.name!r}, path={self.path!r}, "
            f"base_model_name={self.base_model_name!r}, is_3d_lora_weight=False)"
        )


@dataclass(frozen=True)
class LoraOptions:
    """``--enable-lora`` and its limits (vLLM's ``LoRAConfig``, ``config/lora.py``)."""

    enabled: bool = False
    max_loras: int = 1
    max_lora_rank: int = 16
    max_cpu_loras: int | None = None
    modules: tuple[LoraModule, ...] = ()


@dataclass
class FrontendOptions:
    """Every vLLM flag the console does not declare, typed, by ``dest``.

    ``dotted`` keeps dotted JSON keys (``-cc.mode=none``) as given: vLLM folds them into
    config objects the simulator does not model.
    """

    values: dict[str, Any] = field(default_factory=dict)
    dotted: list[str] = field(default_factory=list)

    @property
    def api_key(self) -> str | None:
        """``--api-key`` (first value) or ``VLLM_API_KEY``; guards /v1 like vLLM."""
        keys = self.values.get("api_key")
        if keys:
            return str(keys[0])
        return os.environ.get("VLLM_API_KEY") or None

    @property
    def log_stats(self) -> bool:
        """False with ``--disable-log-stats`` (no ``vllm:`` metrics at all)."""
        return not self.values.get("disable_log_stats", False)

    @property
    def access_log(self) -> bool:
        """uvicorn's access log is on unless disabled or the level hides INFO."""
        level = self.values.get("uvicorn_log_level", "info")
        return not self.values.get("disable_uvicorn_access_log") and level in (
            "info",
            "debug",
            "trace",
        )

    @property
    def performance_mode(self) -> str:
        """``--performance-mode`` (``balanced`` by default)."""
        return str(self.values.get("performance_mode") or "balanced")

    @property
    def load_tracking(self) -> bool:
        """``--enable-server-load-tracking``: /load counts in-flight requests."""
        return bool(self.values.get("enable_server_load_tracking", False))

    @property
    def log_requests(self) -> bool:
        """``--enable-log-requests``: one ``Received request`` line per request."""
        return bool(self.values.get("enable_log_requests", False))

    @property
    def mfu_metrics(self) -> bool:
        """``--enable-mfu-metrics``: the ``vllm:estimated_*_per_gpu`` counters count."""
        return bool(self.values.get("enable_mfu_metrics", False))

    @property
    def fingerprint(self) -> tuple[str, str | None]:
        """``--fingerprint-mode`` and ``--fingerprint-value``."""
        mode = str(self.values.get("fingerprint_mode") or "full")
        value = self.values.get("fingerprint_value")
        return mode, None if value is None else str(value)

    @property
    def lora(self) -> LoraOptions:
        """The LoRA settings (``--enable-lora``, ``--max-loras``, ...)."""
        v = self.values
        modules = tuple(v.get("lora_modules") or ())
        return LoraOptions(
            enabled=bool(v.get("enable_lora")),
            max_loras=int(v.get("max_loras") or 1),
            max_lora_rank=int(v.get("max_lora_rank") or 16),
            max_cpu_loras=v.get("max_cpu_loras"),
            modules=modules,
        )


@dataclass(frozen=True)
class SimCommand:
    """A fully parsed ``vtc-sim serve`` command line."""

    parsed: ParsedServeArgs
    frontend: FrontendOptions
    sim: SimOptions


SIM_FLAGS = (
    "--sim-gpu",
    "--sim-gpus",
    "--sim-speed",
    "--sim-gpu-used-gb",
    "--sim-seed",
    "--sim-fixed-ttft-ms",
    "--sim-fixed-itl-ms",
    "--sim-vllm-version",
    "--sim-host",
    "--sim-profile",
)


def _raw_sim_options(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    rest: list[str] = []
    raw: dict[str, str] = {}
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        name, eq, inline = token.partition("=")
        norm = "--" + name[2:].replace("_", "-") if name.startswith("--") else name
        if norm in SIM_FLAGS:
            if eq:
                raw[norm] = inline
            elif i + 1 < len(tokens):
                raw[norm] = tokens[i + 1]
                i += 1
            else:
                raise ArgvError(f"argument {norm}: expected one argument")
        else:
            rest.append(token)
        i += 1
    return raw, rest


def _fixed_timing(raw: dict[str, str]) -> FixedTiming | None:
    if "--sim-fixed-ttft-ms" not in raw and "--sim-fixed-itl-ms" not in raw:
        return None
    # Either one switches to injected delays; the other defaults to 0.
    ttft_ms = _typed(raw, "--sim-fixed-ttft-ms", float, 0.0)
    itl_ms = _typed(raw, "--sim-fixed-itl-ms", float, 0.0)
    for name, value in (("--sim-fixed-ttft-ms", ttft_ms), ("--sim-fixed-itl-ms", itl_ms)):
        if not 0.0 <= value < 3_600_000.0:  # also refuses nan and inf
            raise ArgvError(f"argument {name}: must be >= 0 and below one hour")
    return FixedTiming(ttft_ms / 1000.0, itl_ms / 1000.0)


def split_sim_options(
    argv: Sequence[str], environ: Mapping[str, str] | None = None
) -> tuple[SimOptions, list[str]]:
    """Take the ``--sim-*`` options out of ``argv``; raises :class:`ArgvError` on bad values.

    ``environ`` (default: this process's) is the server's environment: the variables vLLM
    reads that change what the simulator imitates (``VLLM_USE_V2_MODEL_RUNNER``).
    """
    raw, rest = _raw_sim_options(argv)
    environ = os.environ if environ is None else environ
    try:
        gpu = resolve_gpu(raw.get("--sim-gpu", DEFAULT_GPU))
    except UnknownGpuError as exc:
        raise ArgvError(f"argument --sim-gpu: {exc}") from exc
    num_gpus = _typed(raw, "--sim-gpus", int, 1)
    speed = _typed(raw, "--sim-speed", float, 1.0)
    used_gb = _typed(raw, "--sim-gpu-used-gb", float, 0.0)
    seed = _typed(raw, "--sim-seed", int, 0)
    if not 0 <= seed < 2**63:
        raise ArgvError("argument --sim-seed: must be a whole number, 0 or more")
    if not 1 <= num_gpus <= 1024:
        raise ArgvError("argument --sim-gpus: must be between 1 and 1024")
    if not 0 < speed < 1e6:  # also refuses nan and inf
        raise ArgvError("argument --sim-speed: must be greater than 0 and below 1000000")
    if not 0 <= used_gb < 1e6:
        raise ArgvError("argument --sim-gpu-used-gb: must be >= 0")
    used = int(used_gb * 2**30)
    if used >= gpu.total_bytes:
        raise ArgvError(
            f"argument --sim-gpu-used-gb: must be below the GPU's {gpu.memory_gib:.2f} GiB"
        )
    try:
        version = check_sim_version(raw.get("--sim-vllm-version", DEFAULT_SIM_VLLM_VERSION))
    except ValueError as exc:
        raise ArgvError(f"argument --sim-vllm-version: {exc}") from exc
    host = raw.get("--sim-host", "linux")
    if host not in SIM_HOSTS:
        choices = ", ".join(repr(h) for h in SIM_HOSTS)
        raise ArgvError(f"argument --sim-host: invalid choice: {host!r} (choose from {choices})")
    try:
        runner_v2 = uses_model_runner_v2(version, environ)
    except ValueError as exc:  # vLLM's envs.py fails the same way, at its first read
        raise ArgvError(f"{RUNNER_V2_ENV}: {exc}") from exc
    profile = None
    if "--sim-profile" in raw:
        try:
            profile = load_profile(raw["--sim-profile"])
            version = profile_version(profile, version, "--sim-vllm-version" in raw)
        except ProfileError as exc:
            raise ArgvError(f"argument --sim-profile: {exc.one_line()}") from exc
    fixed = _fixed_timing(raw)
    options = SimOptions(
        gpu, num_gpus, speed, used, seed, fixed, version, host, runner_v2, profile=profile
    )
    return options, rest


def profile_version(profile: Profile, version: str, named: bool) -> str:
    """The vLLM version the simulator speaks with ``profile``: the one it was fitted on.

    A profile of a version the simulator cannot speak, or of another one than
    ``--sim-vllm-version`` named (``named``), is refused with one line: its step times are
    another engine's.
    """
    fitted = profile.identity.vllm_version
    if not fitted:
        return version
    matches = [v for v in SIM_VLLM_VERSIONS if series(v) == series(fitted)]
    if not matches:
        spoken = ", ".join(SIM_VLLM_VERSIONS)
        raise ProfileError(
            f"profile {profile.name} was fitted on vLLM {fitted[:40]}; "
            f"the simulator speaks {spoken}",
            hint="recalibrate against a server of one of those",
        )
    if named and series(version) != series(fitted):
        raise ProfileError(
            f"profile {profile.name} was fitted on vLLM {fitted[:40]}, "
            f"not --sim-vllm-version {version}"
        )
    return version if named else matches[-1]


def _typed(raw: dict[str, str], name: str, kind: type, default: Any) -> Any:
    if name not in raw:
        return default
    try:
        return kind(raw[name])
    except (ValueError, OverflowError) as exc:
        raise ArgvError(f"argument {name}: invalid {kind.__name__} value: {raw[name]!r}") from exc


# -- vLLM's parser ------------------------------------------------------------------------------
def _declared() -> dict[str, FlagSpec]:
    return {spec.name: spec for spec in flag_specs()}


def parse_lora_modules(items: Sequence[Any]) -> tuple[LoraModule, ...]:
    """vLLM's ``LoRAParserAction`` (``entrypoints/launchers/cli_args.py:38-69``)."""
    out: list[LoraModule] = []
    for item in items:
        if item in (None, ""):
            continue
        text = item if isinstance(item, str) else json.dumps(item)
        if "=" in text and "," not in text:  # old format: name=path
            name, path = text.split("=", 1)
            out.append(LoraModule(name, path))
            continue
        try:
            data = loads_json(text)
        except ValueError as exc:
            raise ArgvError(f"Invalid JSON format for --lora-modules: {text}") from exc
        entries = data if isinstance(data, list) else [data]
        for entry in entries:
            if not isinstance(entry, dict) or not {"name", "path"} <= set(entry):
                raise ArgvError(
                    f"Invalid fields for --lora-modules: {text} - LoRAModulePath.__init__() "
                    "missing required arguments: 'name' and 'path'"
                )
            base = entry.get("base_model_name")
            out.append(LoraModule(str(entry["name"]), str(entry["path"]), base and str(base)))
    return tuple(out)


class _Parser:
    """One pass of argparse over ``vllm serve``'s argv (Python 3.11 semantics)."""

    def __init__(self, tokens: list[str], cli: VllmCli) -> None:
        self.tokens = tokens
        self.cli = cli
        self.declared = _declared()
        self.model: str | None = None
        self.values: dict[str, Any] = {}
        self.frontend = FrontendOptions()
        self.unknown: list[str] = []
        self.i = 0
        self.only_positional = False

    def run(self) -> SimCommand:
        """Parse every token; the command (without ``--sim-*`` options)."""
        self.loop()
        if self.unknown:
            raise UnrecognizedArgs(self.unknown)
        flag_model = self.frontend.values.pop("model", None)
        model = self.model if self.model is not None else flag_model
        parsed = ParsedServeArgs(model=model and str(model), values=self.values, extra=())
        return SimCommand(parsed, self.frontend, SimOptions(resolve_gpu(DEFAULT_GPU)))

    def loop(self) -> None:
        """Consume the tokens (unknown ones are collected, not raised)."""
        while self.i < len(self.tokens):
            token = self.tokens[self.i]
            self.i += 1
            if token == "--" and not self.only_positional:
                self.only_positional = True
                continue
            res = None if self.only_positional else self.cli.resolve(token)
            if res is None or res.status == "positional":
                self._positional(token)
            elif res.status == "ambiguous":
                raise ArgvError(
                    f"ambiguous option: {token.split('=', 1)[0]} could match "
                    + ", ".join(res.candidates)
                )
            elif res.status == "unknown":
                self._unknown(token)
            else:
                assert res.flag is not None
                self._option(token, res, res.flag)

    def _positional(self, token: str) -> None:
        if self.model is None:
            self.model = token
        else:
            self.unknown.append(token)

    def _unknown(self, token: str) -> None:
        self.unknown.append(token)
        # argparse leaves the value after an unknown option unconsumed too; both are reported.
        if "=" not in token and self.i < len(self.tokens) and self._is_value(self.tokens[self.i]):
            self.unknown.append(self.tokens[self.i])
            self.i += 1

    def _is_value(self, token: str) -> bool:
        return self.only_positional or self.cli.resolve(token).status == "positional"

    def _inline(self, token: str, res: Resolution) -> str | None:
        """The explicit argument glued to the option (``--x=v``, ``-qawq``, ``-O3``)."""
        if token.startswith("--"):
            return token.split("=", 1)[1] if "=" in token else None
        if res.option == "--optimization-level" and token.startswith("-O"):
            return token[2:].removeprefix("=") or None
        name, eq, value = token.partition("=")
        if eq and name == res.option:
            return value
        if len(token) > len(res.option) and token.startswith(res.option):
            return token[len(res.option) :]
        return None

    def _take(self, flag: CliFlag, inline: str | None) -> list[str]:
        low, high = arity(flag)
        args: list[str] = [] if inline is None else [inline]
        while (high is None or len(args) < high) and self.i < len(self.tokens):
            if not self._is_value(self.tokens[self.i]):
                break
            args.append(self.tokens[self.i])
            self.i += 1
        if len(args) < low:
            raise ArgvError(expected_message(flag))
        return args

    def _option(self, token: str, res: Resolution, flag: CliFlag) -> None:
        if flag.action == "help":
            raise ArgvError("--help is handled by the command, not here")
        name = token.split("=", 1)[0]
        if "." in name.lstrip("-"):
            # A dotted JSON key (-cc.mode=none): vLLM folds it into the JSON flag; the
            # simulator does not model those configs, so it is only kept.
            text = token.split("=", 1)[1] if "=" in token else self._take_one(flag)
            self.frontend.dotted.append(f"{name}={text}")
            return
        inline = self._inline(token, res)
        if flag.is_boolean:
            if inline is not None:
                raise ArgvError(
                    f"argument {action_name(flag)}: ignored explicit argument {inline!r}"
                )
            self._store(flag, flag.action != "store_false" and not flag.is_negative(res.option))
            return
        args = self._take(flag, inline)
        spec = self.declared.get(flag.dest)
        if spec is not None and spec.kind is not FlagKind.BOOL:
            try:
                self.values[spec.name] = spec.parse(args[0])
            except ValueError as exc:
                raise ArgvError(str(exc)) from exc
            except OverflowError as exc:  # vLLM itself dies with a traceback here
                raise ArgvError(
                    f"argument {action_name(flag)}: invalid {flag.type_name} value: {args[0]!r}"
                ) from exc
            return
        if flag.dest == "config":
            self._expand_config(args[0])
            return
        stored = values_for(flag, args)
        if flag.dest == "lora_modules":
            stored = parse_lora_modules(stored)
        if flag.action == "append":
            self.frontend.values.setdefault(flag.dest, []).append(stored)
        else:
            self.frontend.values[flag.dest] = stored

    def _take_one(self, flag: CliFlag) -> str:
        if self.i >= len(self.tokens):
            raise ArgvError(expected_message(flag))
        self.i += 1
        return self.tokens[self.i - 1]

    def _store(self, flag: CliFlag, value: bool) -> None:
        spec = self.declared.get(flag.dest)
        if spec is not None:
            self.values[spec.name] = value
        else:
            self.frontend.values[flag.dest] = value

    def _expand_config(self, path: str) -> None:
        """``--config FILE``: its flags go right after the model (``argparse_utils.py:479``)."""
        suffix = Path(path).suffix.lstrip(".")
        if suffix not in ("yaml", "yml"):
            raise ArgvError(f"Config file must be of a yaml/yml type. {suffix} supplied")
        try:
            mapping = load_config_mapping(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ConfigYamlError) as exc:
            raise ArgvError(f"argument --config: {exc}") from exc
        # CLI > config > defaults: the file's tokens are parsed now and anything already
        # given, or given later on the command line, wins (later tokens overwrite).
        earlier = dict(self.values), dict(self.frontend.values)
        inner = _Parser(vllm_config_args(mapping), self.cli)
        inner.model = self.model or ""  # the file's own positionals are not the model
        inner.loop()
        if inner.unknown:
            raise UnrecognizedArgs(inner.unknown)
        self.values = {**inner.values, **earlier[0]}
        self.frontend.values = {**inner.frontend.values, **earlier[1]}


def parse_command(argv: Sequence[str]) -> SimCommand:
    """Parse ``MODEL [flags] [--sim-*]``; :class:`ArgvError` / :class:`UnrecognizedArgs`."""
    sim, rest = split_sim_options(argv)
    if rest and rest[0] == "serve":
        rest = rest[1:]
    command = _Parser(rest, serve_cli(sim.vllm_version)).run()
    return SimCommand(command.parsed, command.frontend, sim)


def non_default_args(command: SimCommand) -> dict[str, Any]:
    """What ``api_utils.py:286`` logs: every argument that differs from its default.

    In the parser's action order (``vars(args)``), ``model_tag`` first; secrets as ``***``.
    """
    parsed, front = command.parsed, command.frontend.values
    out: dict[str, Any] = {"model_tag": parsed.model}
    for flag in serve_cli(command.sim.vllm_version).flags:
        dest = flag.dest
        if dest == "model":
            out["model"] = parsed.model
            continue
        if dest in parsed.values:
            value = parsed.values[dest]
        elif dest in front:
            value = front[dest]
        else:
            continue
        if value == flag.default or dest in out:
            continue
        if dest in ("api_key", "hf_token"):
            value = "***"
        elif dest == "served_model_name" and isinstance(value, str):
            value = [value]
        elif isinstance(value, tuple):
            value = list(value)
        out[dest] = value
    return out
