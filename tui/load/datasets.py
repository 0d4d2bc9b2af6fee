"""Workloads besides the random one: shared prefix, a JSONL file of prompts, ShareGPT.

- **shared prefix**: the random workload with a common leading prefix sized for a target
  prefix-cache hit rate, the way ``auto_tune.sh`` turns ``MIN_CACHE_HIT_PCT`` into
  ``--random-prefix-len`` (reference section 5, step 4): ``prefix = input·pct/100`` and
  ``--random-input-len = input − prefix``.
- **JSONL** (``vllm bench serve --dataset-name custom``, ``datasets.py`` ``CustomDataset``):
  one ``{"prompt": ..., "output_tokens": N}`` object per line; ``output_tokens`` is needed
  only when no output length is given. Shuffled with ``random.seed(seed)``, oversampled
  like bench serve. Prompts are sent as written, like bench serve with
  ``--skip-chat-template`` (applying a chat template needs Jinja; use the chat endpoint
  to have the server apply the model's template).
- **ShareGPT** (``--dataset-name sharegpt``, ``ShareGPTDataset``): a JSON list of
  ``{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}]}``;
  entries with fewer than two turns are dropped, the rest shuffled with
  ``random.seed(seed)``; the prompt is turn 0, the output length the token count of turn 1
  (or the fixed ``output_len``); pairs failing ``is_valid_sequence`` are skipped (prompt
  or output shorter than 4 tokens, prompt over 1024, total over 2048).

Python's ``random.Random(seed)`` draws the same sequence as bench serve's seeded global
generator, so with the same tokenizer the same requests come out in the same order.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui.domain.workload import LoadSpec
from tui.load.errors import LoadError
from tui.load.prompts import PromptRequest, Tokenizer
from tui.store.bounded_read import UntrustedFileError, parse_json, read_text

#: bench serve's ``--custom-output-len`` default.
DEFAULT_CUSTOM_OUTPUT_LEN = 256
#: ``is_valid_sequence`` limits (``datasets.py:340-363``).
MIN_LEN, MAX_PROMPT_LEN, MAX_TOTAL_LEN = 4, 1024, 2048


MAX_DATASET_BYTES = 4 * 2**30
"""The largest dataset file read (ShareGPT's cleaned split is about 650 MiB)."""


def _dataset_text(path: str | Path) -> str:
    """The dataset file as text, through the one bounded reader (a FIFO, a folder, a file
    that is not UTF-8: one line)."""
    try:
        return read_text(path, max_bytes=MAX_DATASET_BYTES, what="dataset")
    except UntrustedFileError as exc:
        raise DatasetError(exc.message) from None


class DatasetError(LoadError):
    """A dataset file that cannot be used, with a message saying why."""


def shared_prefix_spec(spec: LoadSpec, cache_hit_pct: float) -> LoadSpec:
    """``spec`` with a shared prefix of ``cache_hit_pct`` % of its ``input_len``.

    ``auto_tune.sh``'s arithmetic: ``prefix_len = input_len·pct/100`` (whole tokens) and
    the random part is ``input_len − prefix_len``, so prompts keep their total size.
    """
    if not 0.0 <= cache_hit_pct < 100.0:
        raise LoadError(f"cache hit percentage must be in [0, 100), got {cache_hit_pct}")
    prefix = int(spec.input_len * cache_hit_pct / 100.0)
    return spec.model_copy(update={"prefix_len": prefix, "input_len": spec.input_len - prefix})


def expected_hit_pct(prefix_len: int, prompt_len: int, block_size: int, num_special: int) -> float:
    """The prefix-cache hit rate vLLM will report once the prefix is cached.

    vLLM caches whole blocks: the shared part (the special tokens the server prepends
    plus the prefix) counts in full blocks only, over the prompt as the server sees it.
    """
    if block_size < 1 or prompt_len < 1:
        raise ValueError("block_size and prompt_len must be >= 1")
    shared = num_special + prefix_len
    served = num_special + prompt_len
    cached = min((shared // block_size) * block_size, served - 1)
    return 100.0 * max(0, cached) / served


@dataclass(frozen=True)
class _Sample:
    prompt: str
    prompt_len: int
    output_len: int


def _oversample(samples: list[_Sample], num_prompts: int, seed: int) -> list[_Sample]:
    """bench serve's ``maybe_oversample_requests``: ``random.seed(seed)``, then choices."""
    if len(samples) >= num_prompts:
        return samples
    if not samples:
        raise DatasetError("the dataset has no usable request")
    rng = random.Random(seed)
    return samples + [rng.choice(samples) for _ in range(num_prompts - len(samples))]


def _requests(samples: Sequence[_Sample]) -> list[PromptRequest]:
    return [
        PromptRequest(
            index=i, prompt=s.prompt, prompt_len=s.prompt_len, expected_output_len=s.output_len
        )
        for i, s in enumerate(samples)
    ]


def custom_prompts(
    path: str | Path,
    tokenizer: Tokenizer,
    num_prompts: int,
    *,
    output_len: int | None = DEFAULT_CUSTOM_OUTPUT_LEN,
    seed: int = 0,
    shuffle: bool = True,
    oversample: bool = True,
) -> list[PromptRequest]:
    """Prompts from a JSONL file, as bench serve's ``custom`` dataset samples them.

    ``output_len`` None (or -1) takes each line's ``output_tokens``; ``num_prompts <= 0``
    takes every line. ``prompt_len`` counts the prompt with the special tokens.
    """
    rows: list[dict[str, Any]] = []
    lines = _dataset_text(path).splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = parse_json(line)
        except ValueError as exc:
            raise DatasetError(f"{path}:{number}: not JSON ({exc})") from None
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
            raise DatasetError(f"{path}:{number}: each line needs a string 'prompt'")
        rows.append(row)
    if shuffle:
        random.Random(seed).shuffle(rows)
    wanted = num_prompts if num_prompts > 0 else len(rows)
    samples: list[_Sample] = []
    for number, row in enumerate(rows[:wanted]):
        if output_len is None or output_len == -1:
            if "output_tokens" not in row:
                raise DatasetError(
                    "If no output length is provided the custom dataset must contain an "
                    f"'output_tokens' field (row {number} after shuffling has none)."
                )
            try:
                out = int(row["output_tokens"])
            except (TypeError, ValueError) as exc:
                raise DatasetError(
                    f"Invalid value for 'output_tokens' in custom dataset: "
                    f"'{row['output_tokens']}'. Must be an integer."
                ) from exc
        else:
            out = output_len
        if out < 1:
            raise DatasetError(f"output length must be >= 1, got {out}")
        prompt = str(row["prompt"])
        samples.append(_Sample(prompt, len(tokenizer.encode(prompt, add_special_tokens=True)), out))
    if oversample:
        samples = _oversample(samples, wanted, seed)
    return _requests(samples)


def _valid(prompt_len: int, output_len: int, fixed_output: bool) -> bool:
    """``is_valid_sequence`` with its default limits."""
    return not (
        prompt_len < MIN_LEN
        or (not fixed_output and output_len < MIN_LEN)
        or prompt_len > MAX_PROMPT_LEN
        or prompt_len + output_len > MAX_TOTAL_LEN
    )


def sharegpt_prompts(
    path: str | Path,
    tokenizer: Tokenizer,
    num_prompts: int,
    *,
    output_len: int | None = None,
    seed: int = 0,
    shuffle: bool = True,
    oversample: bool = True,
) -> list[PromptRequest]:
    """Prompts from a ShareGPT-format JSON file, as ``ShareGPTDataset.sample`` picks them."""
    try:
        data = parse_json(_dataset_text(path), max_depth=None)  # hundreds of MiB: no scan
    except ValueError as exc:
        raise DatasetError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a JSON list of conversations")
    entries = [
        e
        for e in data
        if isinstance(e, dict)
        and isinstance(e.get("conversations"), list)
        and len(e["conversations"]) >= 2
    ]
    if shuffle:
        random.Random(seed).shuffle(entries)
    if output_len is not None and output_len < 1:
        raise DatasetError(f"output length must be >= 1, got {output_len}")
    samples: list[_Sample] = []
    for entry in entries:
        if len(samples) >= num_prompts:
            break
        turns = entry["conversations"]
        prompt, completion = _turn_text(turns[0]), _turn_text(turns[1])
        prompt_len = len(tokenizer.encode(prompt, add_special_tokens=True))
        out = (
            output_len
            if output_len is not None
            else len(tokenizer.encode(completion, add_special_tokens=True))
        )
        if not _valid(prompt_len, out, output_len is not None):
            continue
        samples.append(_Sample(prompt, prompt_len, out))
    if oversample:
        samples = _oversample(samples, num_prompts, seed)
    return _requests(samples)


def _turn_text(turn: Any) -> str:
    value = turn.get("value") if isinstance(turn, dict) else None
    if not isinstance(value, str):
        raise DatasetError("each conversation turn needs a string 'value'")
    return value
