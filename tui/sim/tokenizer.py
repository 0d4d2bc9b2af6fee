"""What the simulator counts tokens with: the model's own ``tokenizer.json``, or an approximation.

:func:`~tui.sim.tokenizer_pick.load_tokenizer` picks, as vLLM would find them:
``--tokenizer`` if given, else the model's folder (a local directory, or its snapshot in the
local Hugging Face cache; never a download). When that folder has a ``tokenizer.json``,
:class:`~tui.sim.hf_tokenizer.HfTokenizer` counts exactly as vLLM does (``/tokenize``,
``/detokenize``, ``usage``, the prefix cache's block hashes all see the real ids).
Otherwise, for catalogue models with no files at hand, :class:`ApproxTokenizer` stands in,
and the start-up log says so.

The approximation, documented so clients can rely on it:

- a token is a run of up to 10 letters/digits (with the whitespace before it), or a single
  punctuation/symbol character (with the whitespace before it); so a prompt of N common
  English words separated by spaces is N tokens, as it roughly is for Llama/Qwen/Mistral BPE
  vocabularies (and exactly as ``tui.load.prompts.ApproxTokenizer`` counts);
- completions prompts get one BOS token when the model's tokenizer adds one (Llama,
  Mistral; not Qwen), as vLLM's ``usage.prompt_tokens`` counts it;
- a chat request adds template tokens per message and for the assistant header
  (:func:`chat_template_overhead`), close to the Llama 3 / ChatML / Mistral templates.

Its ids are a CRC of the token text over the model's vocabulary (stable within a process,
which is all prefix caching needs). Generated text comes from a fixed word list, one token
per word, under either tokenizer.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

_TOKEN = re.compile(r"\s*(?:[^\W_]{1,10}|[^\w\s]|_)", re.UNICODE)

# Generated words: each " word" is one token under _TOKEN.
GEN_WORDS: tuple[str, ...] = (
    "the",
    "model",
    "serves",
    "tokens",
    "from",
    "a",
    "paged",
    "cache",
    "while",
    "scheduler",
    "batches",
    "requests",
    "each",
    "step",
    "reads",
    "weights",
    "once",
    "and",
    "every",
    "sequence",
    "adds",
    "one",
    "token",
    "so",
    "larger",
    "raise",
    "throughput",
    "until",
    "memory",
    "or",
    "compute",
    "becomes",
    "limit",
    "prefill",
    "is",
    "bound",
    "decode",
    "bandwidth",
    "holds",
    "keys",
    "values",
    "for",
    "layer",
    "of",
    "running",
    "blocks",
    "are",
    "shared",
    "when",
    "prompts",
    "share",
    "prefix",
)

_SPECIAL_IDS = 1000  # ids below this are reserved for special tokens
APPROX_NOTE = (
    "counting tokens with the simulator's approximation (a word or a punctuation mark per "
    "token, ids by hash); /tokenize, usage and prefix-cache hits are approximate"
)


class ChatTemplateError(ValueError):
    """A chat request the model's template cannot render (vLLM answers 400)."""


class Tokenizer(Protocol):
    """What the simulator's API and engine need from a tokenizer."""

    description: str  # for the start-up log
    exact: bool  # True when counting with the model's own tokenizer.json
    eos_id: int

    def prompt_ids(self, prompt: str | Sequence[int], add_special_tokens: bool = True) -> list[int]:
        """Token ids of a completions prompt (text, or ids passed through)."""
        ...

    def chat_ids(
        self, messages: Sequence[dict[str, Any]], add_generation_prompt: bool = True
    ) -> list[int]:
        """Token ids of a chat prompt, template included."""
        ...

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids`` (special tokens kept, as ``/detokenize`` does)."""
        ...

    def token_strs(self, ids: Sequence[int]) -> list[str]:
        """The vocabulary strings of ``ids`` (``/tokenize``'s ``token_strs``)."""
        ...

    def generation_vocab(self) -> list[tuple[int, str]]:
        """``(id, text)`` of the tokens the simulated model generates."""
        ...


def tokenize(text: str) -> list[str]:
    """Split ``text`` into token strings (leading whitespace kept on each token)."""
    return _TOKEN.findall(text)


def count_tokens(text: str) -> int:
    """Number of tokens in ``text`` under the approximation (no special tokens)."""
    return len(_TOKEN.findall(text))


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


class ApproxTokenizer:
    """The approximation above, with a bounded id -> text table for ``/detokenize``."""

    exact = False
    description = "approximate"

    def __init__(
        self,
        vocab_size: int = 128256,
        adds_bos: bool = True,
        chat_template: str = "llama3",
        table_limit: int = 200_000,
    ) -> None:
        # At least 2^16 id values whatever the model's vocabulary: with a tiny vocabulary
        # the hash ids would collide and fake prefix-cache hits between unrelated prompts.
        self.vocab_size = max(vocab_size, _SPECIAL_IDS + 2**16)
        self.adds_bos = adds_bos
        self.chat_template = chat_template
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

    def prompt_ids(self, prompt: str | Sequence[int], add_special_tokens: bool = True) -> list[int]:
        """Token ids of a completions prompt, BOS included when the model adds one."""
        if not isinstance(prompt, str):
            return [int(i) for i in prompt]
        ids = self.encode(prompt)
        return [self.bos_id, *ids] if self.adds_bos and add_special_tokens else ids

    def chat_ids(
        self, messages: Sequence[dict[str, Any]], add_generation_prompt: bool = True
    ) -> list[int]:
        """Template tokens plus every message's text (:func:`chat_template_overhead`)."""
        ids: list[int] = []
        for m in messages:
            role = str(m.get("role", "user"))
            ids.append(self.token_id(f"<|{role}|>"))
            ids.extend(self.encode(message_text(m.get("content"))))
        overhead = chat_template_overhead(self.chat_template, len(messages)) - len(messages)
        ids.extend([self.eos_id] * max(0, overhead))
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        """Text for ids this process has seen; unknown ids read as ``<unk>``."""
        return "".join(self.token_strs(list(ids)))

    def token_strs(self, ids: Sequence[int]) -> list[str]:
        """The text of each id (special ids are dropped)."""
        return [self._texts.get(int(i), " <unk>") for i in ids if int(i) >= _SPECIAL_IDS]

    def generated_token(self, index: int) -> tuple[int, str]:
        """The id and text of generated word number ``index`` (cycling the word list)."""
        word = " " + GEN_WORDS[index % len(GEN_WORDS)]
        return self.token_id(word), word

    def generation_vocab(self) -> list[tuple[int, str]]:
        """One token per word of :data:`GEN_WORDS`."""
        return [self.generated_token(i) for i in range(len(GEN_WORDS))]
