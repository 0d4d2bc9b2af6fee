"""A sweep, as a ``presets/sweeps/*.toml`` file (or the console's sweep form) declares it.

Every flag value goes through ``ServeFlags`` (or the pass-through table of
:mod:`.tunables`), the workload through ``LoadSpec``: a spec that loads can only propose
flags vtc would launch and loads vtc can run. The layout::

    name = "..."            strategy = "search"     objective = "output_throughput"
    [base]        model, extra_args; [base.flags] fixed flags
    [parameters]  name = [values] | {start, stop, step}
    [workload]    LoadSpec's fields, cache_hit_pct, lora_adapter
    [slo]         p99_e2el_ms = 13000, min_prefix_cache_hit_pct = 30 ...
    [goodput]     ttft/tpot/e2el thresholds in ms (default: the p99 limits)
    [budget]      max_starts, max_wall_s
    [auto_tune] / [grid] / [search]   each strategy's options
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tui.domain.flags.serve import ServeFlags, problems_from_error
from tui.domain.sweep.slo import GOODPUT_METRICS, Objective, SloLimits
from tui.domain.sweep.tunables import Value, build_flags, check_value, tunable_names
from tui.domain.workload import LoadSpec

StrategyName = Literal["auto_tune", "grid", "search", "twin"]
"""The strategies, declared once: the spec's field, ``--strategy``'s choices, the console's
menu and ``tui.tune.strategies``' registry all derive from it (a test checks the last two)."""
STRATEGIES: tuple[StrategyName, ...] = get_args(StrategyName)
STRATEGY_LABELS: dict[StrategyName, str] = {
    "search": "search (TPE, pruned)",
    "twin": "twin-first",
    "grid": "grid",
    "auto_tune": "auto_tune.sh",
}
"""Each strategy's name in the console's menu, in the menu's order."""
RatePolicy = Literal["none", "descent", "bisect"]
"""How a configuration whose SLOs fail at the workload's rate is measured further: not at
all, auto_tune.sh's descent by 1 req/s, or a bisection of the SLO-bounded rate."""

MAX_VALUES = 10_000
"""The most values one parameter takes (a list, or a range's count)."""
MAX_COMBINATIONS = 100_000
"""The largest space a sweep accepts (the product of its parameters' sizes, times the grid's
``serve_params`` records): counted before anything is enumerated, so a huge space is
refused at once with its size instead of filling memory; no budget runs that many starts."""
_SCALAR = (bool, int, float, str)


def _kind(value: object) -> str:
    if isinstance(value, list | tuple):
        return "a list"
    return "a table" if isinstance(value, dict) else type(value).__name__


def check_flag_values(flags: Any, where: str) -> None:
    """A flag takes one value: text, a number or true/false (``ValueError`` in those words)."""
    if not isinstance(flags, dict):
        return
    for name, value in flags.items():
        if not isinstance(value, _SCALAR):
            raise ValueError(
                f"{where}{name} = {str(value)[:60]} is {_kind(value)}: a flag takes one value "
                "(text, a number or true/false); several values to try go under [parameters]"
            )


def range_count(start: float, stop: float, step: float) -> int:
    """How many values ``start..stop`` by ``step`` holds (``ValueError`` if it never ends)."""
    if step == 0 or (stop - start) * step < 0 or not math.isfinite((stop - start) / step):
        raise ValueError(f"range {start}..{stop} never ends with step {step}")
    return math.floor((stop - start) / step + 1e-9) + 1


def _check_parameter(name: str, space: object) -> int:
    """How many values ``space`` (a list, or a range table) gives, checked in our words."""
    if isinstance(space, dict) and {"start", "stop", "step"} <= set(space):
        try:
            count = range_count(*(float(space[k]) for k in ("start", "stop", "step")))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"parameter {name}: {exc}") from None
    elif isinstance(space, list | tuple):
        bad = next((v for v in space if not isinstance(v, _SCALAR)), None)
        if bad is not None:
            raise ValueError(
                f"parameter {name}: {str(bad)[:60]} is {_kind(bad)}; each value to try is "
                "text, a number or true/false"
            )
        count = len(space)
    elif isinstance(space, ParamRange):
        count = range_count(space.start, space.stop, space.step)
    else:
        raise ValueError(
            f"parameter {name} = {str(space)[:60]}: give a list of values to try, or a range "
            "table {start, stop, step}"
        )
    if count > MAX_VALUES:
        raise ValueError(
            f"parameter {name} has {count:,} values; a parameter takes at most {MAX_VALUES:,}"
        )
    return count


def check_space(data: Any) -> None:
    """Refuse, before anything is built, a space larger than :data:`MAX_COMBINATIONS`."""
    if not isinstance(data, dict) or not isinstance(data.get("parameters", {}), dict):
        return
    sizes = {n: _check_parameter(n, s) for n, s in data.get("parameters", {}).items()}
    grid = data.get("grid")
    records = grid.get("serve_params") if isinstance(grid, dict) else None
    total = math.prod(sizes.values()) * max(1, len(records) if isinstance(records, list) else 1)
    if total > MAX_COMBINATIONS:
        shape = " x ".join(f"{n} {c:,}" for n, c in sizes.items())
        raise ValueError(
            f"the sweep space has {total:,} combinations ({shape}), more than the "
            f"{MAX_COMBINATIONS:,} a sweep takes: use fewer values or a coarser step"
        )


class ParamRange(BaseModel):
    """``start`` to ``stop`` inclusive by ``step`` (negative to count down)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    start: float
    stop: float
    step: float

    @model_validator(mode="after")
    def _direction(self) -> ParamRange:
        count = range_count(self.start, self.stop, self.step)
        if count > MAX_VALUES:
            raise ValueError(f"range has {count:,} values, more than {MAX_VALUES:,}")
        return self

    def values(self) -> list[float | int]:
        """The values, rounded to the step's decimals; ints when all three are whole."""
        whole = all(float(x).is_integer() for x in (self.start, self.stop, self.step))
        decimals = max(_decimals(self.start), _decimals(self.step))
        count = math.floor((self.stop - self.start) / self.step + 1e-9) + 1
        out: list[float | int] = []
        for i in range(count):
            value = round(self.start + i * self.step, decimals)
            out.append(int(value) if whole else value)
        return out


def _decimals(x: float) -> int:
    text = repr(float(x))
    return len(text.split(".")[1].rstrip("0")) if "." in text and "e" not in text else 6


class SweepBase(BaseModel):
    """The fixed part of every trial's command: the model, flags, extra arguments."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    model: str = Field(min_length=1)
    flags: dict[str, Value] = Field(default_factory=dict)
    extra_args: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _scalars(cls, data: Any) -> Any:
        if isinstance(data, dict):
            check_flag_values(data.get("flags"), "flags.")
        return data

    @model_validator(mode="after")
    def _valid(self) -> SweepBase:
        try:
            build_flags(self.model, self.flags, self.extra_args)
        except ValidationError as exc:
            raise ValueError(f"base flags: {_first(exc)}") from exc
        return self

    def flags_for(self, choice: dict[str, Value]) -> ServeFlags:
        """The base with ``choice`` over it (``ValidationError``: the flag rules refuse it)."""
        return build_flags(self.model, {**self.flags, **choice}, self.extra_args)


def _first(exc: ValidationError) -> str:
    problem = problems_from_error(exc)[0]
    return f"{problem.field}: {problem.message}" if problem.field else problem.message


class SweepWorkload(BaseModel):
    """vtc bench's workload (``LoadSpec``), a shared prefix for a cache-hit target, an adapter.

    ``cache_hit_pct`` sizes a shared prefix as auto_tune.sh does: ``prefix_len =
    input_len * pct / 100`` and the random part ``input_len - prefix_len`` (applied by the
    tuner with the load room's ``shared_prefix_spec``). ``lora_adapter``: the adapter the
    requests address when a trial enables LoRA (else the base model). Without
    ``max_concurrency`` there is no cap, as in ``vllm bench serve``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    load: LoadSpec
    cache_hit_pct: float | None = Field(default=None, ge=0, lt=100)
    lora_adapter: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _flat(cls, data: Any) -> Any:
        """Accept the flat TOML table: LoadSpec's fields beside ours."""
        if not isinstance(data, dict) or "load" in data:
            return data
        ours = {k: data[k] for k in ("cache_hit_pct", "lora_adapter") if k in data}
        load = {k: v for k, v in data.items() if k not in ours}
        load.setdefault("max_concurrency", None)
        return {**ours, "load": load}


class Budget(BaseModel):
    """When a sweep stops on its own: server starts and wall time (``None``: unbounded)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    max_starts: int | None = Field(default=None, ge=1)
    max_wall_s: float | None = Field(default=None, gt=0)


class AutoTuneOptions(BaseModel):
    """auto_tune.sh's constants (reference section 5)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    probe_start: float = Field(default=0.98, gt=0, le=1)
    probe_stop: float = Field(default=0.90, gt=0, le=1)
    probe_step: float = Field(default=0.01, gt=0)
    first_prompts: int = Field(default=1000, ge=1)  # the rate-inf run
    descent_prompts: int = Field(default=100, ge=1)  # each step of the rate descent
    settle_s: float = Field(default=0.0, ge=0)  # the script sleeps 5 s after each reset

    def probe_values(self) -> list[float]:
        """0.98, 0.97, ... 0.90: the utilizations the probe tries, highest first."""
        if self.probe_stop > self.probe_start:
            return []
        span = ParamRange(start=self.probe_start, stop=self.probe_stop, step=-self.probe_step)
        return [float(v) for v in span.values()]


class GridOptions(BaseModel):
    """The Cartesian product, optionally ``vllm bench sweep serve``'s parameter files.

    ``serve_params`` / ``bench_params``: its JSON (a list of records, or a dict of named
    records), each record a set of ``vllm serve`` / ``vllm bench serve`` settings;
    ``link_vars``: ``serve_key=bench_key`` pairs that must be equal (its ``--link-vars``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    serve_params: list[dict[str, Any]] | None = None
    bench_params: list[dict[str, Any]] | None = None
    link_vars: tuple[tuple[str, str], ...] = ()
    rate_search: RatePolicy = "none"


class SearchOptions(BaseModel):
    """The model-based search's knobs."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    seed: int = 0
    startup_trials: int = Field(default=5, ge=1)  # random points before TPE models
    # starts without improvement before stopping: 6 stopped the search 11-15 starts into
    # 72-384-combination spaces short of the best (benchmarks/sweep_efficiency.py)
    patience: int = Field(default=10, ge=1)
    short_fraction: float = Field(default=0.25, gt=0, le=1)  # prompts of a short benchmark
    min_short_prompts: int = Field(default=16, ge=1)
    promote_within: float = Field(default=0.10, ge=0, le=1)  # of the best short result
    confirm_seeds: int = Field(default=3, ge=1)  # the best, re-run; reported by its worst
    rate_search: RatePolicy = "bisect"
    bisect_steps: int = Field(default=5, ge=1)


class TwinOptions(BaseModel):
    """The twin-first sweep's knobs (``tui.tune.strategies.twin``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    profile: str | None = None
    """The profile the twin runs (a name in the data dir, or a file); ``None``: the spec's
    ``sim_gpu`` (a hand-made catalogue GPU, corrected by every real trial)."""
    tolerance: float = Field(default=0.02, ge=0, le=1)
    """A gain smaller than this fraction of the real best is not worth another start (about
    a real measurement's own noise): the sweep stops once no candidate left could beat the
    real best by more, even if the twin under-predicts it by its whole error."""


class SweepSpec(BaseModel):
    """A whole sweep. Construct with :meth:`model_validate`; invalid specs never load."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    name: str = Field(min_length=1)
    description: str = ""
    source: str = ""
    strategy: StrategyName = "search"
    objective: Objective = "output_throughput"
    sim_gpu: str | None = None  # --demo: the simulated GPU
    base: SweepBase
    parameters: dict[str, list[Value] | ParamRange] = Field(default_factory=dict)
    workload: SweepWorkload
    slo: SloLimits = Field(default_factory=SloLimits)
    goodput: dict[str, float] = Field(default_factory=dict)
    budget: Budget = Field(default_factory=Budget)
    auto_tune: AutoTuneOptions = Field(default_factory=AutoTuneOptions)
    grid: GridOptions = Field(default_factory=GridOptions)
    search: SearchOptions = Field(default_factory=SearchOptions)
    twin: TwinOptions = Field(default_factory=TwinOptions)

    @model_validator(mode="before")
    @classmethod
    def _bounded(cls, data: Any) -> Any:
        """The rules in their own words before pydantic's union text, the size first."""
        check_space(data)
        return data

    @model_validator(mode="after")
    def _parameters(self) -> SweepSpec:
        for name, space in self.parameters.items():
            if name not in tunable_names():
                raise ValueError(f"parameter {name!r} is not a tunable flag")
            values = space.values() if isinstance(space, ParamRange) else space
            if not values:
                raise ValueError(f"parameter {name} has no values")
            for value in values:
                check_value(name, value)
        for metric, ms in self.goodput.items():
            if metric not in GOODPUT_METRICS or not ms >= 0:
                raise ValueError(f"goodput {metric}:{ms}: keys {GOODPUT_METRICS}, ms >= 0")
        if self.strategy == "auto_tune":
            missing = {"max_num_seqs", "max_num_batched_tokens"} - set(self.parameters)
            if missing:
                raise ValueError(f"auto_tune sweeps {', '.join(sorted(missing))}: list them")
        return self

    def values(self, name: str) -> tuple[Value, ...]:
        """Parameter ``name``'s values in declared order, each checked (floats coerced)."""
        space = self.parameters[name]
        raw = space.values() if isinstance(space, ParamRange) else space
        out: dict[Value, None] = {}  # ordered, and a set's cost to find a repeat
        for value in raw:
            out.setdefault(check_value(name, value), None)
        return tuple(out)

    def space_size(self) -> int:
        """How many combinations the parameters make."""
        return math.prod(len(self.values(name)) for name in self.parameters)

    def goodput_slos(self) -> dict[str, float]:
        """bench serve's ``--goodput`` thresholds: declared, else the p99 limits."""
        return dict(self.goodput) or self.slo.goodput_defaults()

    def fingerprint(self) -> str:
        """A short hash of everything that decides the trials (resume finds them by it)."""
        data = self.model_dump(mode="json")
        if self.twin == TwinOptions():  # left out at its defaults: the ids of sweeps
            del data["twin"]  # journaled before the twin strategy existed stay the same
        text = json.dumps(data, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:10]

    def sweep_id(self) -> str:
        """``<name>-<fingerprint>``: the same spec resumes the same sweep."""
        safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in self.name)
        return f"{safe}-{self.fingerprint()}"
