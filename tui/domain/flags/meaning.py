"""Find a flag by what it does: its name, its section, vLLM's help text and operator words.

An operator types what they want ("context length", "cuda graph", "kv offload"), not the
option's spelling. :func:`rank` orders every flag the console can edit for such a query:

1. its name, spaces read as dashes (``max model len`` is ``--max-model-len``), or its
   initials (``mml``);
2. the operator words of :data:`OPERATOR_WORDS` (``context length`` -> ``--max-model-len``),
   in the order each entry lists its flags: the flag that does what the words say first;
3. every word in its name (``offload`` -> ``--offload-backend``), a name prefix first;
4. every word in its form section or vLLM group (``batching``);
5. every word in vLLM's own help text for the installed version (``cuda`` ->
   ``--enforce-eager``, whose help names CUDA graphs), the words side by side first.

A query word matches a word of the text when it starts it (``spec`` finds
"speculative"), so typing finds as it goes. Pure: the palette and the form's search box
both read it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tui.domain.flags.cli_fields import fieldable
from tui.domain.flags.spec import FlagSpec
from tui.domain.flags.vllm_cli import CliFlag, VllmCli

_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class FlagDoc:
    """One flag as the search reads it: ``key`` is what a hit hands back (a field name)."""

    key: str
    option: str  # the primary ``--option``
    dest: str  # vLLM's snake_case name
    section: str  # the form's section, or vLLM's group for a flag the form does not declare
    help: str
    aliases: tuple[str, ...] = ()
    declared: bool = True  # a field of the form's own; else one the installed vLLM adds


def docs_for(specs: Iterable[FlagSpec], cli: VllmCli) -> list[FlagDoc]:
    """The form's declared flags (their help, then vLLM's own for the installed version),
    then every other flag of ``cli`` that can be a field (:func:`~tui.domain.flags.
    cli_fields.fieldable`), with vLLM's group as its section."""
    docs: list[FlagDoc] = []
    declared: set[str] = set()
    for spec in specs:
        own = cli.flag(spec.name) or cli.flag(spec.cli)
        declared.add(spec.name)
        declared.update(spec.spellings)
        docs.append(
            FlagDoc(
                key=spec.name,
                option=spec.cli,
                dest=spec.name,
                section=spec.group.value,
                help=f"{spec.help} {own.help if own else ''}",
                aliases=spec.aliases,
            )
        )
    for flag in cli.flags:
        if flag.dest in declared or flag.name in declared or not fieldable(flag):
            continue
        docs.append(_cli_doc(flag))
    return docs


def _cli_doc(flag: CliFlag) -> FlagDoc:
    return FlagDoc(
        key=flag.dest,
        option=flag.name,
        dest=flag.dest,
        section=flag.group,
        help=flag.help,
        aliases=tuple(a for a in flag.aliases if a.startswith("--")),
        declared=False,
    )


@dataclass(frozen=True)
class Hit:
    """A flag that matches, with its score (higher first) and why it matched."""

    doc: FlagDoc
    score: float
    why: str


OPERATOR_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("context length", ("max_model_len",)),
    ("context window", ("max_model_len",)),
    ("context", ("max_model_len",)),
    ("sequence length", ("max_model_len", "max_num_batched_tokens")),
    ("seq len", ("max_model_len",)),
    ("prompt length", ("max_model_len",)),
    ("cuda graph", ("enforce_eager", "compilation_config", "cudagraph_capture_sizes")),
    ("cudagraph", ("enforce_eager", "compilation_config", "cudagraph_capture_sizes")),
    ("cuda", ("enforce_eager", "compilation_config")),
    ("graph", ("enforce_eager", "compilation_config", "cudagraph_capture_sizes")),
    ("eager", ("enforce_eager",)),
    ("torch compile", ("compilation_config", "enforce_eager", "optimization_level")),
    ("compile", ("compilation_config", "enforce_eager", "optimization_level")),
    ("prefix cache", ("enable_prefix_caching", "prefix_caching_hash_algo")),
    ("prefix caching", ("enable_prefix_caching", "prefix_caching_hash_algo")),
    ("kv offload", ("kv_offloading_size", "kv_offloading_backend")),
    ("kv cache offload", ("kv_offloading_size", "kv_offloading_backend")),
    ("offload", ("kv_offloading_size", "kv_offloading_backend", "cpu_offload_gb")),
    ("cpu offload", ("cpu_offload_gb", "kv_offloading_size", "kv_offloading_backend")),
    ("swap", ("kv_offloading_size", "cpu_offload_gb")),
    ("speculative", ("speculative_config", "spec_method", "spec_model", "spec_tokens")),
    ("speculative decoding", ("speculative_config", "spec_method", "spec_model")),
    ("spec decode", ("speculative_config", "spec_method", "spec_model")),
    ("draft", ("speculative_config", "spec_model", "spec_tokens")),
    ("draft model", ("speculative_config", "spec_model")),
    ("eagle", ("speculative_config", "spec_method")),
    ("mtp", ("speculative_config", "spec_method")),
    ("ngram", ("speculative_config", "spec_method")),
    ("quantization", ("quantization", "kv_cache_dtype", "dtype")),
    ("quantize", ("quantization", "kv_cache_dtype")),
    ("quant", ("quantization", "kv_cache_dtype")),
    ("fp8", ("quantization", "kv_cache_dtype")),
    ("awq", ("quantization",)),
    ("gptq", ("quantization",)),
    ("precision", ("dtype", "quantization", "kv_cache_dtype")),
    ("batch size", ("max_num_seqs", "max_num_batched_tokens")),
    ("batch", ("max_num_seqs", "max_num_batched_tokens")),
    ("concurrency", ("max_num_seqs",)),
    ("concurrent requests", ("max_num_seqs",)),
    ("token budget", ("max_num_batched_tokens",)),
    ("chunked prefill", ("enable_chunked_prefill", "max_num_batched_tokens")),
    ("memory", ("gpu_memory_utilization", "kv_cache_memory_bytes", "cpu_offload_gb")),
    ("gpu memory", ("gpu_memory_utilization", "kv_cache_memory_bytes")),
    ("vram", ("gpu_memory_utilization", "kv_cache_memory_bytes")),
    ("oom", ("gpu_memory_utilization", "max_model_len", "max_num_seqs")),
    ("out of memory", ("gpu_memory_utilization", "max_model_len", "max_num_seqs")),
    ("kv cache", ("kv_cache_memory_bytes", "gpu_memory_utilization", "kv_cache_dtype")),
    ("kv cache size", ("kv_cache_memory_bytes", "gpu_memory_utilization")),
    ("kv blocks", ("block_size", "num_gpu_blocks_override")),
    ("tensor parallel", ("tensor_parallel_size",)),
    ("pipeline parallel", ("pipeline_parallel_size",)),
    ("multi gpu", ("tensor_parallel_size", "pipeline_parallel_size")),
    ("gpus", ("tensor_parallel_size", "pipeline_parallel_size")),
    ("lora", ("enable_lora", "max_loras", "max_lora_rank")),
    ("model name", ("served_model_name",)),
    ("listen", ("host", "port")),
    ("address", ("host", "port")),
)
"""Operator words -> the flags that do what they say, the most direct first. A query that
holds every word of an entry (or types the start of one) ranks its flags above name and
help matches; a flag the installed vLLM lacks is skipped."""

# Scores: one band per rule of the module docstring, a flag's best rule wins.
NAME_EXACT, INITIALS, OPERATOR, NAME, SECTION, HELP = 1000.0, 950.0, 900.0, 700.0, 500.0, 300.0


def words(text: str) -> list[str]:
    """``text`` as lower-case words (``_``, ``-``, ``.`` and blanks separate them)."""
    return _WORD.findall(text.lower())


def _joined(text: str) -> str:
    return "-".join(words(text))


def holds_words(query: str, text: str) -> bool:
    """Every word of ``query`` starts a word of ``text`` (``request rate`` in ``workload
    request-rate``); a blank query holds none."""
    q = words(query)
    return bool(q) and _has_all(q, words(text))


def _has_all(query: Sequence[str], text_words: Sequence[str]) -> bool:
    """Every query word starts some word of the text."""
    return all(any(w.startswith(q) for w in text_words) for q in query)


def _adjacent(query: Sequence[str], text_words: Sequence[str]) -> int | None:
    """Where the query's words first occur side by side in the text (``None``: nowhere)."""
    n = len(query)
    for i in range(len(text_words) - n + 1):
        if all(text_words[i + j].startswith(query[j]) for j in range(n)):
            return i
    return None


def _operator_score(query: Sequence[str], dest: str) -> float | None:
    """The best operator-words entry that names ``dest`` and fits the query."""
    best: float | None = None
    for phrase, dests in OPERATOR_WORDS:
        if dest not in dests:
            continue
        phrase_words = phrase.split()
        exact = phrase_words == list(query)
        # every word of the phrase in the query, or the query typing the phrase's start
        held = all(p in query for p in phrase_words)
        typing = len(query) <= len(phrase_words) and all(
            phrase_words[i].startswith(q) for i, q in enumerate(query)
        )
        if not (exact or held or (typing and len("".join(query)) >= 3)):
            continue
        score = OPERATOR + (50 if exact else 0) + 10 * len(phrase_words) - dests.index(dest)
        best = score if best is None else max(best, score)
    return best


def score(query: str, doc: FlagDoc) -> Hit | None:
    """How well ``doc`` answers ``query``; ``None`` when it does not."""
    q = words(query)
    if not q:
        return None
    names = [_joined(doc.option), _joined(doc.dest), *(_joined(a) for a in doc.aliases)]
    if "-".join(q) in names:
        return Hit(doc, NAME_EXACT, "name")
    if len(q) == 1 and len(q[0]) >= 2 and q[0] == "".join(w[0] for w in words(doc.option)):
        return Hit(doc, INITIALS, "initials")
    found: list[tuple[float, str]] = []
    op = _operator_score(q, doc.dest)
    if op is not None:
        found.append((op, "meaning"))
    name_words = words(doc.option.lstrip("-")) + words(doc.dest)
    if _has_all(q, name_words):
        prefix = 20.0 if names[0].startswith(q[0]) else 0.0
        found.append((NAME + prefix - len(names[0]) / 10, "name"))
    if _has_all(q, words(doc.section)):
        found.append((SECTION, "section"))
    help_words = words(doc.help)
    if help_words and _has_all(q, help_words):
        at = _adjacent(q, help_words)
        near = 100.0 - min(at, 99) if at is not None else 0.0
        found.append((HELP + near, "help"))
    if not found:
        return None
    best, why = max(found)
    return Hit(doc, best, why)


def rank(query: str, docs: Iterable[FlagDoc]) -> list[Hit]:
    """Every doc that matches ``query``, best first (ties keep ``docs``' order)."""
    hits = [h for h in (score(query, d) for d in docs) if h is not None]
    return sorted(hits, key=lambda h: -h.score)
