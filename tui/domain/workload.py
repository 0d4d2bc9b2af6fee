"""What the load generator is asked to do, and the live progress it reports.

:class:`LoadSpec` is the one declaration of a workload: each field carries its type,
default, bounds, label, help and the ``vllm bench serve`` flag it maps to
(:func:`workload_field`). Everything else is rendered from it: ``vtc bench``'s arguments
(``tui.load.bench_args``), the console form's Workload fields (:func:`form_fields`) and
the spec itself (preset TOML ``[workload]``, stored runs), as ``ServeFlags`` does for
vLLM's flags.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, get_args

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import JsonDict

Endpoint = Literal["completions", "chat"]

#: How a field is typed on a form or a command line.
WorkloadKind = Literal["int", "optional_int", "float", "optional_float", "rate", "choice", "bool"]


MAX_TOKENS = 1_000_000_000
"""The most tokens one prompt or answer may ask for: a thousand times the longest contexts
(a client-side memory check refuses far less), below what a typo of 10^15 would ask."""
MAX_REQUESTS = 100_000_000
"""The most requests (or requests in flight) one load may have."""


def workload_field(
    default: Any,
    *,
    label: str,
    help: str,
    bench_flag: str,
    bench_aliases: tuple[str, ...] = (),
    bench_default: Any = ...,
    cli_values: dict[str, str] | None = None,
    form: bool = False,
    blank: str = "",
    ge: float | None = None,
    gt: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    finite: bool = False,
) -> Any:
    """A :class:`LoadSpec` field with everything the renderings need.

    ``bench_flag``: the ``vllm bench serve`` option it maps to (bench serve's spelling; a
    few are vtc's own, marked so in ``help``); ``bench_default``: bench serve's default
    where it differs from the console's (``...``: the same); ``cli_values``: the value as
    the command line spells it, when it differs (the endpoint is a path there); ``form``:
    shown in the console form's Workload section; ``blank``: what an empty form field
    means; ``finite``: infinity and NaN refused.
    """
    extra: JsonDict = {
        "label": label,
        "bench_flag": bench_flag,
        "bench_aliases": list(bench_aliases),
        "bench_default": "same" if bench_default is ... else {"value": bench_default},
        "cli_values": dict(cli_values or {}),
        "form": form,
        "blank": blank,
    }
    checks: dict[str, Any] = {
        k: v for k, v in (("ge", ge), ("gt", gt), ("lt", lt), ("le", le)) if v is not None
    }
    if finite:
        checks["allow_inf_nan"] = False
    return Field(default=default, description=help, json_schema_extra=extra, **checks)


class LoadSpec(BaseModel):
    """A load run, in ``vllm bench serve``'s terms (reference section 4)."""

    # "Infinity" in JSON (an infinite request rate), not null: it must read back. A
    # misspelt key (a preset's [workload], a stored run) is an error, not a silent default.
    model_config = ConfigDict(frozen=True, ser_json_inf_nan="strings", extra="forbid")

    endpoint: Endpoint = workload_field(
        "completions",
        label="endpoint",
        help="OpenAI endpoint the load calls.",
        bench_flag="--endpoint",
        form=True,
        cli_values={"completions": "/v1/completions", "chat": "/v1/chat/completions"},
    )
    input_len: int = workload_field(
        128,
        ge=1,
        le=MAX_TOKENS,
        label="input-len",
        help="Prompt tokens per request (random dataset).",
        bench_flag="--random-input-len",
        bench_aliases=("--input-len",),
        bench_default=1024,
        form=True,
    )
    output_len: int = workload_field(
        128,
        ge=1,
        le=MAX_TOKENS,
        label="output-len",
        help="Output tokens per request (ignore_eos).",
        bench_flag="--random-output-len",
        bench_aliases=("--output-len",),
        form=True,
    )
    range_ratio: float = workload_field(
        0.0,
        ge=0.0,
        lt=1.0,
        finite=True,
        label="range-ratio",
        help="Input and output lengths vary uniformly by this fraction around their value.",
        bench_flag="--random-range-ratio",
    )
    prefix_len: int = workload_field(
        0,
        ge=0,
        le=MAX_TOKENS,
        label="prefix-len",
        help="Shared prefix tokens in front of every prompt (prefix caching).",
        bench_flag="--random-prefix-len",
        form=True,
    )
    num_prompts: int = workload_field(
        64,
        ge=1,
        le=MAX_REQUESTS,
        label="num-prompts",
        help="Requests in the run.",
        bench_flag="--num-prompts",
        bench_default=1000,
        form=True,
    )
    max_concurrency: int | None = workload_field(
        16,
        ge=1,
        le=MAX_REQUESTS,
        label="max-concurrency",
        help="Most requests in flight at once.",
        bench_flag="--max-concurrency",
        bench_default=None,
        form=True,
        blank="unlimited",
    )
    request_rate: float = workload_field(
        math.inf,
        gt=0,
        label="request-rate",
        help="Arrivals per second (Poisson unless burstiness is set).",
        bench_flag="--request-rate",
        form=True,
        blank="inf",
    )
    burstiness: float = workload_field(
        1.0,
        gt=0,
        label="burstiness",
        help="Gamma shape of the arrival gaps: 1 is Poisson, lower is burstier, inf constant.",
        bench_flag="--burstiness",
    )
    seed: int = workload_field(
        0,
        ge=0,
        le=2**63 - 1,
        label="seed",
        help="Seed of the prompts and the arrivals.",
        bench_flag="--seed",
    )
    ignore_eos: bool = workload_field(
        True,
        label="ignore-eos",
        help="Generate every output token even past end-of-sequence. vtc bench: forced for "
        "the random datasets, as bench serve does.",
        bench_flag="--ignore-eos",
        bench_default=False,
    )
    temperature: float | None = workload_field(
        None,
        ge=0.0,
        finite=True,
        label="temperature",
        help="Sampling temperature sent with each request (empty: the server's default).",
        bench_flag="--temperature",
    )
    request_timeout_s: float = workload_field(
        600.0,
        gt=0,
        finite=True,
        label="request-timeout",
        help="Seconds before one request is failed (vtc's own).",
        bench_flag="--request-timeout",
    )
    duration_s: float | None = workload_field(
        None,
        gt=0,
        finite=True,
        label="duration",
        help="Send for this many seconds (cycling through the prompts) instead of "
        "num-prompts requests (vtc's own).",
        bench_flag="--duration",
        blank="count",
    )
    num_warmups: int = workload_field(
        0,
        ge=0,
        le=MAX_REQUESTS,
        label="num-warmups",
        help="Copies of the first prompt sent and awaited first, left out of the numbers.",
        bench_flag="--num-warmups",
    )

    @model_validator(mode="before")
    @classmethod
    def _blank_words(cls, data: Any) -> Any:
        """A field's ``blank`` word (``max_concurrency = "unlimited"`` in TOML) means None."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for field in workload_fields():
            value = out.get(field.name)
            optional = field.kind.startswith("optional")
            if optional and isinstance(value, str) and value.strip().lower() == field.blank:
                out[field.name] = None
        return out

    @model_validator(mode="after")
    def _closed_loop_needs_slots(self) -> LoadSpec:
        if self.closed_loop and self.max_concurrency is None:
            raise ValueError(
                "a run bounded by a duration at an infinite request rate needs a max "
                "concurrency (it is then a closed loop)"
            )
        return self

    def to_toml_dict(self) -> dict[str, Any]:
        """The fields that differ from the defaults, as TOML can hold them.

        TOML has no null: a field set to None where its default is not (an unlimited
        ``max_concurrency``) is written as its ``blank`` word, which reads back as None.
        """
        out: dict[str, Any] = {}
        blanks = {f.name: f.blank for f in workload_fields()}
        for name, value in self.model_dump(exclude_defaults=True).items():
            out[name] = blanks[name] if value is None else value
        return out

    @property
    def timed(self) -> bool:
        """Bounded by a duration rather than by a count of prompts."""
        return self.duration_s is not None

    @property
    def closed_loop(self) -> bool:
        """Timed at an infinite rate: a request starts whenever a slot frees up."""
        return self.duration_s is not None and math.isinf(self.request_rate)


@dataclass(frozen=True)
class WorkloadField:
    """One :class:`LoadSpec` field as the form and the command line see it."""

    name: str
    label: str
    kind: WorkloadKind
    help: str
    default: Any
    bench_flag: str
    bench_aliases: tuple[str, ...] = ()
    bench_default: Any = None
    cli_values: tuple[tuple[str, str], ...] = ()  # (spec value, command-line spelling)
    form: bool = False
    blank: str = ""  # what an empty field means (placeholder)
    choices: tuple[str, ...] = ()
    ge: float | None = None
    gt: float | None = None
    lt: float | None = None
    le: float | None = None

    def cli_text(self, value: Any) -> str:
        """``value`` as the command line spells it."""
        return dict(self.cli_values).get(str(value), str(value))

    def from_cli(self, text: str) -> str:
        """A command-line spelling back to the spec's value."""
        return {cli: value for value, cli in self.cli_values}.get(text, text)

    def bound_problem(self, value: float) -> str | None:
        """What is wrong with ``value`` against the declared bounds (None: nothing)."""
        if self.ge is not None and not value >= self.ge:
            return f"must be >= {self.ge:g}"
        if self.gt is not None and not value > self.gt:
            return f"must be > {self.gt:g}"
        if self.lt is not None and not value < self.lt:
            return f"must be < {self.lt:g}"
        if self.le is not None and not value <= self.le:
            return f"must be <= {self.le:g}"
        return None


def _kind(annotation: Any, default: Any) -> tuple[WorkloadKind, tuple[str, ...]]:
    args = tuple(a for a in get_args(annotation) if a is not type(None))
    if annotation is bool:
        return "bool", ()
    if annotation is int:
        return "int", ()
    if annotation is float:
        return ("rate" if default == math.inf else "float"), ()
    if args == (int,):
        return "optional_int", ()
    if args == (float,):
        return "optional_float", ()
    if args and all(isinstance(a, str) for a in args):
        return "choice", args
    raise TypeError(f"no workload kind for {annotation!r}")


@cache
def workload_fields() -> tuple[WorkloadField, ...]:
    """Every :class:`LoadSpec` field, in declaration order."""
    out = []
    for name, info in LoadSpec.model_fields.items():
        extra = info.json_schema_extra
        assert isinstance(extra, dict), name
        bounds: dict[str, float] = {}
        for meta in info.metadata:
            for attr in ("ge", "gt", "lt", "le"):
                if isinstance(meta, getattr(annotated_types, attr.capitalize())):
                    bounds[attr] = getattr(meta, attr)
        kind, choices = _kind(info.annotation, info.default)
        bench = extra["bench_default"]
        cli_values = extra["cli_values"]
        assert isinstance(cli_values, dict)
        out.append(
            WorkloadField(
                name=name,
                label=str(extra["label"]),
                kind=kind,
                help=info.description or "",
                default=info.default,
                bench_flag=str(extra["bench_flag"]),
                bench_aliases=tuple(extra["bench_aliases"]),  # type: ignore[arg-type]
                bench_default=bench["value"] if isinstance(bench, dict) else info.default,
                cli_values=tuple((str(k), str(v)) for k, v in cli_values.items()),
                form=bool(extra["form"]),
                blank=str(extra["blank"]),
                choices=choices,
                **bounds,
            )
        )
    return tuple(out)


def form_fields() -> tuple[WorkloadField, ...]:
    """The fields the console form shows in its Workload section."""
    return tuple(f for f in workload_fields() if f.form)


@dataclass(frozen=True)
class LoadProgress:
    """Once a second while a load runs, and once at its end.

    Besides the counts and rolling percentiles, the client's own health: ``loop_lag_ms``
    is the worst lateness of its event loop over the interval and ``loop_lag_mean_ms`` the
    mean; ``client_cpu_pct`` its CPU over the interval (100 = one core);
    ``client_bound``: the client, not the server, limits what is measured (a busy core or
    a late loop; see ``tui.load.live.client_is_bottleneck``).
    """

    elapsed: float
    done: int
    failed: int
    in_flight: int
    total: int
    output_tokens_per_s: float
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    loop_lag_ms: float | None = None
    loop_lag_mean_ms: float | None = None
    client_cpu_pct: float | None = None
    client_bound: bool = False
