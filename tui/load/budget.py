"""Bounds on a workload before it runs: the server's context length and the client's memory.

A prompt longer than the server's ``max_model_len`` is refused by vLLM ("This model's
maximum context length is ..."), and an output longer than it is capped, so asking for
either is a mistake better caught before a run than after a thousand failed requests.

The client keeps every prompt in memory for the run and every request's inter-token
gaps for the statistics (as bench serve does), so memory grows with
``num_prompts x (input + output)``: :func:`check_memory` refuses a workload whose
estimate passes :data:`MEMORY_BUDGET_BYTES`, in one line, before any prompt is built.
"""

from __future__ import annotations

import math

from tui.domain.workload import LoadSpec
from tui.load.errors import LoadError

#: Most memory a workload may need on the client (estimate, see :func:`workload_bytes`).
MEMORY_BUDGET_BYTES = 2 * 1024**3
#: Bytes per prompt token held: the text (about 4-6 characters per BPE token, one byte each
#: for ASCII) and its JSON request body while it is sent.
PROMPT_BYTES_PER_TOKEN = 12
#: Bytes per output token held for the statistics: one float and its list slot per gap,
#: and the whole run's gaps concatenated once more when the statistics are taken.
OUTPUT_BYTES_PER_TOKEN = 64
#: More per output token when every response's text is kept (``--save-detailed``).
TEXT_BYTES_PER_TOKEN = 16


class WorkloadTooLarge(LoadError):
    """A workload the server or the client's memory cannot take."""


def longest_prompt(spec: LoadSpec, num_special: int) -> int:
    """The most tokens one random prompt of ``spec`` can have (server-side count).

    ``prefix + ceil(real·(1+r)) + special`` with ``real = input_len - special``, the upper
    end of ``get_sampling_params``' range (reference 4.5).
    """
    real = max(0, spec.input_len - num_special)
    return spec.prefix_len + math.ceil(real * (1 + spec.range_ratio)) + num_special


def longest_output(spec: LoadSpec) -> int:
    """The most output tokens one request of ``spec`` asks for."""
    return max(1, math.ceil(spec.output_len * (1 + spec.range_ratio)))


def check_context(
    max_model_len: int, *, prompt_tokens: int, output_tokens: int, input_flag: str, output_flag: str
) -> str | None:
    """Refuse lengths above the server's ``max_model_len``; a note when only their sum is.

    Returns the note (vLLM caps such outputs at ``max_model_len`` minus the prompt), or
    None.
    """
    if prompt_tokens > max_model_len:
        raise WorkloadTooLarge(
            f"{input_flag} asks for prompts of up to {prompt_tokens} tokens, above the "
            f"server's max_model_len {max_model_len}",
            hint="vLLM refuses such prompts; lower the length",
        )
    if output_tokens > max_model_len:
        raise WorkloadTooLarge(
            f"{output_flag} asks for up to {output_tokens} output tokens, above the "
            f"server's max_model_len {max_model_len}",
            hint="lower the length",
        )
    if prompt_tokens + output_tokens > max_model_len:
        return (
            f"note: prompt ({prompt_tokens}) + output ({output_tokens}) tokens can pass the "
            f"server's max_model_len {max_model_len}: vLLM caps those outputs"
        )
    return None


def workload_bytes(spec: LoadSpec, *, collect_text: bool, prompt_tokens: int | None = None) -> int:
    """About how much client memory ``spec`` needs (count-bounded part; see the module)."""
    longest = prompt_tokens if prompt_tokens is not None else longest_prompt(spec, 1)
    per_request = longest * PROMPT_BYTES_PER_TOKEN + longest_output(spec) * (
        OUTPUT_BYTES_PER_TOKEN + (TEXT_BYTES_PER_TOKEN if collect_text else 0)
    )
    return spec.num_prompts * per_request


def check_memory(spec: LoadSpec, *, collect_text: bool, budget: int = MEMORY_BUDGET_BYTES) -> None:
    """Refuse a workload whose memory estimate passes ``budget`` (one line)."""
    need = workload_bytes(spec, collect_text=collect_text)
    if need > budget:
        raise WorkloadTooLarge(
            f"this workload needs about {need / 1024**3:.1f} GiB on the client "
            f"({spec.num_prompts} prompts of up to {longest_prompt(spec, 1)} tokens, "
            f"{longest_output(spec)} output tokens each); the limit is "
            f"{budget / 1024**3:.0f} GiB",
            hint="lower the number of prompts or the lengths",
        )
