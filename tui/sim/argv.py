"""The simulator's command line: vLLM's serve argv, a few real vLLM flags, and ``--sim-*``.

``vtc-sim serve MODEL [flags]`` is parsed by the console's own parser
(:func:`tui.domain.flags.parse_serve_argv`), so both sides agree on every declared flag.
What that parser leaves in ``extra`` is checked against a small allow-list of real vLLM
0.32 flags the simulator accepts (some of them change its behaviour: ``--api-key``,
``--disable-log-stats``, ``--performance-mode``, ...); anything else is rejected the way
vLLM's argparse rejects it (``vllm: error: unrecognized arguments: ...``, exit 2). Like
argparse, an unambiguous prefix of a long option is accepted (``--kv-cache-memory`` for
``--kv-cache-memory-bytes``, reference 2.1).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tui.domain.flags import ArgvError, FlagKind, ParsedServeArgs, flag_specs, parse_serve_argv
from tui.sim.catalog import DEFAULT_GPU, GpuSpec, UnknownGpuError, resolve_gpu

UVICORN_LEVELS = ("critical", "debug", "error", "info", "trace", "warning")
PERFORMANCE_MODES = ("balanced", "interactivity", "throughput")


class UnrecognizedArgs(ArgvError):
    """Tokens vLLM's parser would not recognise (``vllm: error: unrecognized arguments``)."""

    def __init__(self, tokens: list[str]) -> None:
        super().__init__("unrecognized arguments: " + " ".join(tokens))
        self.tokens = tokens


@dataclass(frozen=True)
class _Allowed:
    arity: str  # "0" flag, "1" one value, "+" one or more
    choices: tuple[str, ...] | None = None
    negatable: bool = False
    kind: type = str


# Real vLLM 0.32 serve flags the simulator accepts beyond ServeFlags' declared ones.
ALLOWED: dict[str, _Allowed] = {
    "--trust-remote-code": _Allowed("0", negatable=True),
    "--enable-log-requests": _Allowed("0", negatable=True),
    "--api-key": _Allowed("+"),
    "--uvicorn-log-level": _Allowed("1", UVICORN_LEVELS),
    "--seed": _Allowed("1", kind=int),
    "--load-format": _Allowed("1"),
    "--download-dir": _Allowed("1"),
    "--tokenizer": _Allowed("1"),
    "--revision": _Allowed("1"),
    "--generation-config": _Allowed("1"),
    "--disable-log-stats": _Allowed("0"),
    "--enable-server-load-tracking": _Allowed("0", negatable=True),
    "--disable-uvicorn-access-log": _Allowed("0"),
    "--shutdown-timeout": _Allowed("1", kind=int),
    "--performance-mode": _Allowed("1", PERFORMANCE_MODES),
    "--async-scheduling": _Allowed("0", negatable=True),
    "--disable-fastapi-docs": _Allowed("0"),
    "--model": _Allowed("1"),
}


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


@dataclass
class FrontendOptions:
    """The accepted non-tunable vLLM flags, by snake_case name (see :data:`ALLOWED`)."""

    values: dict[str, Any] = field(default_factory=dict)

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
        return str(self.values.get("performance_mode", "balanced"))

    @property
    def load_tracking(self) -> bool:
        """``--enable-server-load-tracking``: /load counts in-flight requests."""
        return bool(self.values.get("enable_server_load_tracking", False))


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
)


def split_sim_options(argv: Sequence[str]) -> tuple[SimOptions, list[str]]:
    """Take the ``--sim-*`` options out of ``argv``; raises :class:`ArgvError` on bad values."""
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
    try:
        gpu = resolve_gpu(raw.get("--sim-gpu", DEFAULT_GPU))
    except UnknownGpuError as exc:
        raise ArgvError(f"argument --sim-gpu: {exc}") from exc
    num_gpus = _typed(raw, "--sim-gpus", int, 1)
    speed = _typed(raw, "--sim-speed", float, 1.0)
    used_gb = _typed(raw, "--sim-gpu-used-gb", float, 0.0)
    seed = _typed(raw, "--sim-seed", int, 0)
    if num_gpus < 1:
        raise ArgvError("argument --sim-gpus: must be at least 1")
    if not speed > 0:
        raise ArgvError("argument --sim-speed: must be greater than 0")
    if used_gb < 0:
        raise ArgvError("argument --sim-gpu-used-gb: must be >= 0")
    used = int(used_gb * 2**30)
    if used >= gpu.total_bytes:
        raise ArgvError(
            f"argument --sim-gpu-used-gb: must be below the GPU's {gpu.memory_gib:.2f} GiB"
        )
    fixed: FixedTiming | None = None
    if "--sim-fixed-ttft-ms" in raw or "--sim-fixed-itl-ms" in raw:
        # Either one switches to injected delays; the other defaults to 0.
        ttft_ms = _typed(raw, "--sim-fixed-ttft-ms", float, 0.0)
        itl_ms = _typed(raw, "--sim-fixed-itl-ms", float, 0.0)
        for name, value in (("--sim-fixed-ttft-ms", ttft_ms), ("--sim-fixed-itl-ms", itl_ms)):
            if not 0.0 <= value < 3_600_000.0:  # also refuses nan and inf
                raise ArgvError(f"argument {name}: must be >= 0 and below one hour")
        fixed = FixedTiming(ttft_ms / 1000.0, itl_ms / 1000.0)
    return SimOptions(gpu, num_gpus, speed, used, seed, fixed), rest


def _typed(raw: dict[str, str], name: str, kind: type, default: Any) -> Any:
    if name not in raw:
        return default
    try:
        return kind(raw[name])
    except ValueError as exc:
        raise ArgvError(f"argument {name}: invalid {kind.__name__} value: {raw[name]!r}") from exc


def _looks_like_option(token: str) -> bool:
    if not token.startswith("-") or token == "-":
        return False
    try:
        float(token)
        return False
    except ValueError:
        return True


def _known_long_options() -> dict[str, tuple[str, Any]]:
    """Every long option: ``("spec", FlagSpec)`` or ``("allowed", name)``."""
    out: dict[str, tuple[str, Any]] = {}
    for spec in flag_specs():
        for spelling in spec.spellings:
            if spelling.startswith("--"):
                out[spelling] = ("spec", spec)
                if spec.kind is FlagKind.BOOL:
                    out["--no-" + spelling[2:]] = ("spec", spec)
    for name, allowed in ALLOWED.items():
        out[name] = ("allowed", name)
        if allowed.negatable:
            out["--no-" + name[2:]] = ("allowed", name)
    return out


def _match(option: str, known: dict[str, tuple[str, Any]]) -> str | None:
    """Exact name, or argparse's unambiguous-prefix rule; ``ArgvError`` when ambiguous."""
    if option in known:
        return option
    if not option.startswith("--") or len(option) < 3:
        return None
    hits = sorted(k for k in known if k.startswith(option))
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise ArgvError(f"ambiguous option: {option} could match {', '.join(hits)}")
    return None


def parse_command(argv: Sequence[str]) -> SimCommand:
    """Parse ``[serve] MODEL [flags] [--sim-*]``; :class:`ArgvError` / :class:`UnrecognizedArgs`."""
    sim, rest = split_sim_options(argv)
    parsed = parse_serve_argv(rest)
    values = dict(parsed.values)
    model = parsed.model
    frontend = FrontendOptions()
    known = _known_long_options()
    unknown: list[str] = []
    extra = list(parsed.extra)
    i = 0
    while i < len(extra):
        token = extra[i]
        i += 1
        if not _looks_like_option(token):
            if model is None:
                model = token
            else:
                unknown.append(token)
            continue
        name, eq, inline = token.partition("=")
        norm = "--" + name[2:].replace("_", "-") if name.startswith("--") else name
        full = _match(norm, known)
        if full is None:
            unknown.append(token)
            # parse_serve_argv paired an unknown option with the value after it; keep them.
            if not eq and i < len(extra) and not _looks_like_option(extra[i]):
                unknown.append(extra[i])
                i += 1
            continue
        what, target = known[full]
        negated = full.startswith("--no-") and (what == "allowed" and full not in ALLOWED)
        if what == "spec":
            spec = target
            if spec.kind is FlagKind.BOOL:
                values[spec.name] = spec.parse(inline) if eq else not full.startswith("--no-")
                continue
            text = inline if eq else (extra[i] if i < len(extra) else None)
            if text is None:
                raise ArgvError(f"argument {spec.cli}: expected one argument")
            if not eq:
                i += 1
            try:
                values[spec.name] = spec.parse(text)
            except ValueError as exc:
                raise ArgvError(str(exc)) from exc
            continue
        allowed = ALLOWED[target]
        key = target[2:].replace("-", "_")
        if allowed.arity == "0":
            frontend.values[key] = not negated
            continue
        args: list[str] = []
        if eq:
            args.append(inline)
        while i < len(extra) and not _looks_like_option(extra[i]):
            args.append(extra[i])
            i += 1
            if allowed.arity == "1":
                break
        if not args:
            expected = "one argument" if allowed.arity == "1" else "at least one argument"
            raise ArgvError(f"argument {target}: expected {expected}")
        if allowed.choices and args[0] not in allowed.choices:
            options = ", ".join(repr(c) for c in allowed.choices)
            raise ArgvError(
                f"argument {target}: invalid choice: {args[0]!r} (choose from {options})"
            )
        if allowed.kind is int:
            try:
                int(args[0])
            except ValueError as exc:
                raise ArgvError(f"argument {target}: invalid int value: {args[0]!r}") from exc
        frontend.values[key] = (
            args
            if allowed.arity == "+"
            else (allowed.kind(args[0]) if allowed.kind is int else args[0])
        )
    if unknown:
        raise UnrecognizedArgs(unknown)
    flag_model = frontend.values.pop("model", None)
    if model is None and flag_model:
        model = str(flag_model)
    return SimCommand(ParsedServeArgs(model=model, values=values, extra=()), frontend, sim)
