"""The simulator's approximate tokenizer.

No real tokenizer is loaded. The approximation, documented so clients can rely on it:

- a token is a run of up to 10 letters/digits (with the whitespace before it), or a single
  punctuation/symbol character (with the whitespace before it); so a prompt of N common
  English words separated by spaces is N tokens, as it roughly is for Llama/Qwen/Mistral BPE
  vocabularies (and exactly as ``tui.load.prompts.ApproxTokenizer`` counts);
- completions prompts get one BOS token when the model's tokenizer adds one (Llama,
  Mistral; not Qwen), as vLLM's ``usage.prompt_tokens`` counts it;
- a chat request adds template tokens per message and for the assistant header
  (:func:`chat_template_overhead`), close to the Llama 3 / ChatML / Mistral templates.

Token ids are stable within a process (a CRC of the token text), which is all prefix caching
needs; generated text comes from a fixed word list, one token per word.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

_TOKEN = re.compile(r"\s*(?:[^\W_]{1,10}|[^\w\s]|_)", re.UNICODE)

# Generated words: each " word" is one token under _TOKEN.
GEN_WORDS: tuple[str, ...] = (
    "the", "model", "serves", "tokens", "from", "a", "paged", "cache", "while", "scheduler",
    "batches", "requests", "each", "step", "reads", "weights", "once", "and", "every",
    "sequence", "adds", "one", "token", "so", "larger", "raise", "throughput", "until",
    "memory", "or", "compute", "becomes", "limit", "prefill", "is", "bound", "decode",
    "bandwidth", "holds", "keys", "values", "for", "layer", "of", "running", "blocks", "are",
    "shared", "when", "prompts", "share", "prefix",
)  # fmt: skip

_SPECIAL_IDS = 1000  # ids below this are reserved for special tokens


def tokenize(text: str) -> list[str]:
    """Split ``text`` into token strings (leading whitespace kept on each token)."""
    return _TOKEN.findall(text)


def count_tokens(text: str) -> int:
    """Number of tokens in ``text`` under the approximation (no special tokens)."""
    return len(_TOKEN.findall(text))


class SimTokenizer:
    """Stateless-looking tokenizer with a bounded id -> text table for ``/detokenize``."""

    def __init__(self, vocab_size: int = 128256, table_limit: int = 200_000) -> None:
        self.vocab_size = max(vocab_size, _SPECIAL_IDS + len(GEN_WORDS) + 1)
        self._texts: dict[int, str] = {}
        self._limit = table_limit
        self.bos_id = 1
        self.eos_id = 2

    def token_id(self, token: str) -> int:
        """The id of one token string (stable within the process)."""
        span = self.vocab_size - _SPECIAL_IDS
        tid = _SPECIAL_IDS + zlib.crc32(token.encode("utf-8")) % span
        if len(self._texts) < self._limit:
            self._texts.setdefault(tid, token)
        return tid

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens)."""
        return [self.token_id(t) for t in tokenize(text)]

    def decode(self, ids: Iterable[int]) -> str:
        """Text for ids this process has seen; unknown ids read as ``<unk>``."""
        out = []
        for i in ids:
            if i < _SPECIAL_IDS:
                continue
            out.append(self._texts.get(int(i), " <unk>"))
        return "".join(out)

    def generated_token(self, index: int) -> tuple[int, str]:
        """The id and text of generated word number ``index`` (cycling the word list)."""
        word = " " + GEN_WORDS[index % len(GEN_WORDS)]
        return self.token_id(word), word


def prompt_ids(tok: SimTokenizer, prompt: str | Sequence[int], adds_bos: bool) -> list[int]:
    """Token ids of a completions prompt (text or pre-tokenized ids), BOS included."""
    if isinstance(prompt, str):
        ids = tok.encode(prompt)
        return [tok.bos_id, *ids] if adds_bos else ids
    return [int(i) for i in prompt]


def message_text(content: Any) -> str:
    """The text of a chat message's ``content`` (a string or a list of text parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return str(content)


def chat_template_overhead(template: str, num_messages: int) -> int:
    """Template tokens a chat prompt adds around its messages' text.

    llama3: BOS + per message ``<|start_header_id|>role<|end_header_id|>\\n\\n … <|eot_id|>``
    (5) + the assistant header (4). chatml: per message ``<|im_start|>role\\n … <|im_end|>\\n``
    (5) + assistant header (3). mistral: BOS + ``[INST] … [/INST]`` (4 per user turn).
    """
    if template == "chatml":
        return 5 * num_messages + 3
    if template == "mistral":
        return 1 + 4 * num_messages
    return 1 + 5 * num_messages + 4


def chat_prompt_ids(
    tok: SimTokenizer, messages: Sequence[dict[str, Any]], template: str
) -> list[int]:
    """Token ids of a chat prompt: template tokens plus every message's text."""
    ids: list[int] = []
    for m in messages:
        role = str(m.get("role", "user"))
        ids.append(tok.token_id(f"<|{role}|>"))
        ids.extend(tok.encode(message_text(m.get("content"))))
    overhead = chat_template_overhead(template, len(messages)) - len(messages)
    ids.extend([tok.eos_id] * max(0, overhead))
    return ids
