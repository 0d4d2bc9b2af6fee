"""A calibration's designs, its journal, and what a server's log and metrics say of it.

``vtc calibrate`` runs a short designed set of loads against one real server (decode-heavy
at several concurrencies, prefill-heavy long prompts, mixed, with and without a shared
prefix) and fits a :class:`~tui.domain.profile.Profile` to them. The design is sized to the
server's context length and to a stated time budget; each finished load is one journal
line, so an interrupted calibration resumes where it stopped. The memory side and the
identity are read from the startup log's lines and ``vllm:cache_config_info``'s labels
(vLLM 0.32's texts, ``vllm-cpu-findings.md`` "KV cache on CPU" and reference section 2).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from pydantic import BaseModel, ConfigDict

from tui.domain.profile import FitSample, MemorySide
from tui.domain.workload import LoadSpec

JOURNAL_SCHEMA = 1
GIB = 2**30


@dataclass(frozen=True)
class DesignedLoad:
    """One load of the design: a name that says what it probes, and the load.

    ``load`` is the load as designed; :func:`tui.twin.budget.plan` shrinks it to the
    budget, never below ``least`` requests (a concurrency-``c`` load sends at least one
    full batch), and only then the prompts of a ``stretch`` load (its lengths scale with
    the design's length factor, the others' stay: the families' ratios hold). A ``probe``
    runs as designed, before any cost is known: the first rows of
    :class:`tui.twin.budget.LoadCosts`. ``top``: the load whose concurrency is the server's
    ``max_num_seqs``, the last thing a slow server gives up.
    """

    name: str
    load: LoadSpec
    least: int = 2
    stretch: bool = False
    probe: bool = False
    top: bool = False

    @property
    def family(self) -> str:
        """Its family: the name without the pass suffix (``decode-c8#2``: ``decode-c8``)."""
        return self.name.split("#", 1)[0]

    def sized(self, requests: float = 1.0, length: float = 1.0, top: int | None = None) -> LoadSpec:
        """The load with ``requests`` x its requests (at least :attr:`least`), a ``stretch``
        load's prompts x ``length``, and a ``top`` load's concurrency (and requests) ``top``."""
        ld = self.load
        update: dict[str, int] = {"num_prompts": max(self.least, round(ld.num_prompts * requests))}
        if self.stretch and length < 1.0:  # a shared-prefix load's prefix is its long prompt
            key = "prefix_len" if ld.prefix_len else "input_len"
            update[key] = max(16, round(getattr(ld, key) * length))
        if self.top and top is not None and top < (ld.max_concurrency or top):
            update["max_concurrency"] = update["num_prompts"] = top
        return ld.model_copy(update=update)

    def as_run(self, load: LoadSpec) -> DesignedLoad:
        """This load with the sizes of ``load`` (its seed kept: another pass, other prompts)."""
        return replace(self, load=load.model_copy(update={"seed": self.load.seed}))


TOP_CONCURRENCY = 128
"""The highest concurrency a design sends (the server's max_num_seqs when it is lower):
the regime where a batch is as large as the server allows, within the budget."""


def design(
    max_model_len: int,
    scale: float = 1.0,
    seed: int = 7,
    passes: int = 1,
    max_num_seqs: int | None = None,
) -> list[DesignedLoad]:
    """The designed loads for a server of ``max_model_len`` (``scale``: more requests each;
    ``passes``: the whole set again, other prompts, so a busy moment falls on one pass of a
    load and the fit sees it as the outlier it is; the second pass's names end ``#2``),
    at their full size: :func:`tui.twin.budget.plan` fits them to a budget from the costs measured.

    Each term of the step model (``tui.domain.profile``) has loads that move it alone:

    - decode at concurrency 1, 8 and the server's ``max_num_seqs`` (at most
      :data:`TOP_CONCURRENCY`) on short prompts: the per-step, per-token and per-sequence
      costs; decode at concurrency 8 after long prompts: the KV each decode step reads;
    - prefill alone (one output token) at two prompt lengths: the per-token cost apart from
      the attention pairs (which grow with the square of the length); long prompts four at
      a time: chunks through the server's token budget;
    - a mixed load and a shared-prefix load: chunked prefill, decode and prefix-cache hits
      in the same steps.
    """
    long_in = max(64, min(1536, max_model_len // 2))
    mid_in = max(32, min(512, max_model_len // 6))
    short_in = max(16, min(128, max_model_len // 12))
    deep_in = max(32, min(1024, max_model_len // 3))
    top = max(2, min(max_num_seqs or TOP_CONCURRENCY, TOP_CONCURRENCY))

    # In the order a budget cut leaves the most to fit. Three small probes first (decode
    # alone at 1 and 8, short prompts alone): the per-step, per-output-token and
    # per-prompt-token costs every later load is sized from, and already decode apart from
    # prefill; then long prompts, mixed and deep decode; the top concurrency last.
    # (name, input, output, requests, concurrency, prefix, probe, stretch)
    rows = (
        ("decode-c1", 32, 64, 2, 1, 0, True, False),
        ("prefill-short-c1", short_in, 1, 2, 1, 0, True, False),
        ("decode-c8", 32, 64, 8, 8, 0, True, False),
        ("prefill-c1", long_in, 1, 6, 1, 0, False, True),
        ("mixed-c8", mid_in, 64, 24, 8, 0, False, True),
        ("decode-deep-c8", deep_in, 64, 16, 8, 0, False, True),
        ("prefill-c4", long_in, 1, 12, 4, 0, False, True),
        ("prefix-c8", 64, 48, 24, 8, mid_in, False, True),
        ("decode-top", 32, 16, top, top, 0, False, False),
    )
    out_loads = []
    for k in range(max(1, passes)):
        tag = f"#{k + 1}" if k else ""
        for i, (name, inp, out, count, conc, prefix, probe, stretch) in enumerate(rows):
            least = max(2, conc)
            load = LoadSpec(
                input_len=inp,
                output_len=out,
                num_prompts=max(least, round(count * scale)),
                max_concurrency=conc,
                prefix_len=prefix,
                seed=seed + i + 100 * k,
                ignore_eos=True,
            )
            out_loads.append(
                DesignedLoad(name + tag, load, least, stretch, probe, top=name == "decode-top")
            )
    return out_loads


def design_around(load: LoadSpec) -> list[DesignedLoad]:
    """Short loads around a sweep's workload that tell the step costs apart: a cold twin's
    calibration on the sweep's first real start (:meth:`tui.tune.twin_profile.ProfileTwin`).

    Decode-heavy with two requests and with sixteen at once (the per-step and per-token
    costs), prefill-heavy (the per-prompt-token cost): the workload's endpoint and lengths,
    all sent at once with no concurrency cap (the what-if lane models none), a few seconds
    each on the trial's server, no extra start. Named like :func:`design`'s families.
    """
    inp, out = max(16, load.input_len), max(8, load.output_len)
    shapes = [
        ("decode-n2", inp, 2 * out, 2),
        ("decode-n16", inp, out, 16),
        ("prefill-n8", 4 * inp, 4, 8),
    ]
    return [
        DesignedLoad(
            name,
            load.model_copy(
                update={
                    "input_len": i,
                    "output_len": o,
                    "num_prompts": n,
                    "prefix_len": 0,
                    "max_concurrency": None,
                    "request_rate": math.inf,
                    "seed": 101 + k,
                }
            ),
        )
        for k, (name, i, o, n) in enumerate(shapes)
    ]


class JournalLine(BaseModel):
    """One finished load of a calibration (the journal is one of these per line)."""

    model_config = ConfigDict(frozen=True)

    schema_version: int = JOURNAL_SCHEMA
    name: str
    sample: FitSample
    seconds: float  # how long it took, for the ETA of a resumed calibration


@dataclass(frozen=True)
class Progress:
    """Where a calibration stands: loads done, the one running, time spent and left."""

    done: int
    total: int
    current: str
    elapsed_s: float
    eta_s: float | None  # None until a load has finished
    budget_s: float

    def line(self, width: int = 20) -> str:
        """``[#####.....] 3/8 decode-c16 1:02 elapsed, ~0:40 left (budget 5:00)``."""
        filled = round(width * self.done / self.total) if self.total else width
        bar = "#" * filled + "." * (width - filled)
        left = f"~{clock(self.eta_s)} left" if self.eta_s is not None else "estimating"
        return (
            f"[{bar}] {self.done}/{self.total} {self.current} {clock(self.elapsed_s)} elapsed, "
            f"{left} (budget {clock(self.budget_s)})"
        )


def clock(seconds: float) -> str:
    """``m:ss``."""
    s = max(0, round(seconds))
    return f"{s // 60}:{s % 60:02d}"


# -- what the server's log and metrics say -------------------------------------------------------
_KV_TOKENS = re.compile(r"\b(CPU|GPU) KV cache size: ([\d,]+) tokens")
_AVAILABLE = re.compile(r"Available KV cache memory: ([\d.]+) GiB")
_CPU_SET = re.compile(r"Explicitly set \(([\d.]+)/([\d.]+)\) GiB for KV cache")
_WEIGHTS = re.compile(r"Model loading took ([\d.]+) GiB")
_GRAPHS = re.compile(r"Graph capturing finished in [\d.]+ secs, took ([\d.]+) GiB")
_USAGE = re.compile(
    r"Actual usage is ([\d.]+) GiB for weight, ([\d.]+) GiB for peak activation, ([\d.]+) GiB "
    r"for non-torch memory, and ([\d.]+) GiB for CUDAGraph memory"
)
_FREE = re.compile(r"Free memory on device \S+ \(([\d.]+)/([\d.]+) GiB\)")
_VERSION = re.compile(r"(?:version|vLLM engine \(v?)\s*(\d+\.\d+\.\d+\S*)")


@dataclass(frozen=True)
class LogFacts:
    """What a startup log says about the device and memory (``None``: not said)."""

    device_kind: str | None = None  # "cpu" or "gpu"
    kv_tokens: int | None = None
    available_kv_bytes: int | None = None
    weights_bytes: int | None = None
    graph_bytes: int | None = None
    activation_bytes: int | None = None
    non_torch_bytes: int | None = None
    total_bytes: int | None = None
    vllm_version: str | None = None


def _gib(match: re.Match[str] | None, group: int = 1) -> int | None:
    return int(float(match.group(group)) * GIB) if match else None


def log_facts(text: str) -> LogFacts:
    """The memory lines of a vLLM startup log (the last of each, as a restart logs again)."""

    def last(pattern: re.Pattern[str]) -> re.Match[str] | None:
        found = list(pattern.finditer(text))
        return found[-1] if found else None

    kv = last(_KV_TOKENS)
    cpu_set = last(_CPU_SET)
    available = _gib(last(_AVAILABLE)) or _gib(cpu_set)
    total = _gib(last(_FREE), 2) or _gib(cpu_set, 2)
    version = last(_VERSION)
    usage = last(_USAGE)  # the kv-cache-memory hint: every reservation, in one line
    return LogFacts(
        device_kind=kv.group(1).lower() if kv else None,
        kv_tokens=int(kv.group(2).replace(",", "")) if kv else None,
        available_kv_bytes=available,
        weights_bytes=_gib(last(_WEIGHTS)) or _gib(usage, 1),
        graph_bytes=_gib(last(_GRAPHS)) or _gib(usage, 4),
        activation_bytes=_gib(usage, 2),
        non_torch_bytes=_gib(usage, 3),
        total_bytes=total,
        vllm_version=version.group(1) if version else None,
    )


def _label_int(labels: Mapping[str, str], key: str) -> int | None:
    try:
        value = float(labels.get(key, "None"))
    except ValueError:
        return None
    return int(value) if math.isfinite(value) and value > 0 else None


def memory_side(
    labels: Mapping[str, str],
    facts: LogFacts,
    *,
    max_model_len: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
) -> MemorySide | None:
    """The profile's memory side from ``cache_config_info``'s labels and the log's lines.

    ``None`` when neither says the KV capacity (a server with ``--disable-log-stats`` and
    no log).
    """
    block = _label_int(labels, "block_size")
    blocks = _label_int(labels, "num_gpu_blocks")
    tokens = _label_int(labels, "kv_cache_size_tokens") or facts.kv_tokens
    if tokens is None and block and blocks:
        tokens = block * blocks
    if tokens is None or block is None:
        return None
    kv_bytes = _label_int(labels, "kv_cache_memory_bytes") or facts.available_kv_bytes
    util_text = labels.get("gpu_memory_utilization", "None")
    util = float(util_text) if re.fullmatch(r"[\d.]+", util_text) else None
    non_kv = None
    if facts.total_bytes and util and kv_bytes and facts.device_kind == "gpu":
        non_kv = math.ceil(facts.total_bytes * util) - kv_bytes
    return MemorySide(
        kv_tokens=tokens,
        block_size=block,
        num_blocks=blocks or max(1, tokens // block),
        kv_bytes=kv_bytes,
        total_bytes=facts.total_bytes,
        non_kv_bytes=non_kv,
        weights_bytes=facts.weights_bytes,
        graph_bytes=facts.graph_bytes,
        activation_bytes=facts.activation_bytes,
        non_torch_bytes=facts.non_torch_bytes,
        gpu_memory_utilization=util,
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
    )
