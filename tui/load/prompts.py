"""The random workload of ``vllm bench serve --dataset-name random``.

The algorithm mirrors ``benchmarks/datasets/datasets.py:555-764`` and
``benchmarks/datasets/utils.py:19-99`` (reference section 4.5) step for step, over a
small :class:`Tokenizer` protocol, so that a real tokenizer behind that protocol would
draw the same lengths and the same token ids from the same seed:

1. lengths: input uniform over ``[floor(real·(1−r)), ceil(real·(1+r))]`` with
   ``real = input_len − num_special_tokens_to_add()``; output uniform over
   ``[max(1, floor(out·(1−r))), ceil(out·(1+r))]``; then one vocabulary offset per
   request; all from ``np.random.default_rng(seed)`` in that order;
2. one shared prefix of ``prefix_len`` tokens drawn from the non-special ids;
3. each body is ``allowed[(offset + i + arange(len)) % len(allowed)]``;
4. the ids are decoded, re-encoded and truncated or padded (up to 10 retries) so that
   ``prompt_len = prefix_len + sampled_len``.

The model's own ``tokenizer.json`` is read by :mod:`tui.load.tokenizer` when it can be
found (and the ``tokenizers`` library is installed); otherwise :class:`ApproxTokenizer`
is a documented approximation (one common English word per token). The server's
``usage.prompt_tokens`` overwrites the client's count anyway (ref 4.1), so the
statistics stay exact; only the prompt sizes sent are approximate, and the runner
reports the client's own count beside the server's (``client_input_tokens``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from tui.domain.workload import LoadSpec
from tui.load.errors import LoadError

MAX_RETRY = 10  # gen_prompt_decode_to_target_len's retry budget (datasets.py:494-547)


class Tokenizer(Protocol):
    """The part of a Hugging Face tokenizer that the random dataset uses."""

    @property
    def vocab_size(self) -> int:
        """Number of token ids; ids are ``0 .. vocab_size - 1``."""
        ...

    @property
    def all_special_ids(self) -> Sequence[int]:
        """Ids never drawn for prompt text (BOS, EOS, UNK...)."""
        ...

    def num_special_tokens_to_add(self) -> int:
        """Tokens the server adds around a prompt (Llama: 1, the BOS)."""
        ...

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Text to ids."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Ids to text (special ids dropped)."""
        ...


# Common short English words. With a leading space each is a single token in the
# Llama / Mistral / Qwen / GPT-2 style BPE vocabularies, so a prompt of N words is about
# N tokens there (within a few per cent; the first word may lose its space token).
_WORDS_TEXT = (
    "the of and to in is it you that he was for on are with as his they be at one have "
    "this from or had by word but what some we can out other were all there when up use "
    "your how said an each she which do their time if will way about many then them "
    "write would like so these her long make thing see him two has look more day could "
    "go come did number sound no most people my over know water than call first who may "
    "down side been now find any new work part take get place made live where after back "
    "little only round man year came show every good me give our under name very through "
    "just form sentence great think say help low line differ turn cause much mean before "
    "move right boy old too same tell does set three want air well also play small end "
    "put home read hand port large spell add even land here must big high such follow act "
    "why ask men change went light kind off need house picture try us again animal point "
    "mother world near build self earth father head stand own page should country found "
    "answer school grow study still learn plant cover food sun four between state keep "
    "eye never last let thought city tree cross farm hard start might story saw far sea "
    "draw left late run while press close night real life few north open seem together "
    "next white children begin got walk example ease paper group always music those both "
    "mark often letter until mile river car feet care second book carry took science eat "
    "room friend began idea fish mountain stop once base hear horse cut sure watch color "
    "face wood main enough plain girl usual young ready above ever red list though feel "
    "talk bird soon body dog family direct pose leave song measure door product black "
    "short numeral class wind question happen complete ship area half rock order fire "
    "south problem piece told knew pass since top whole king space heard best hour better "
    "true during hundred five remember step early hold west ground interest reach fast "
    "verb sing listen six table travel less morning ten simple several vowel toward war "
    "lay against pattern slow center love person money serve appear road map rain rule "
    "govern pull cold notice voice unit power town fine certain fly fall lead cry dark "
    "machine note wait plan figure star box noun field rest correct able pound done "
    "beauty drive stood contain front teach week final gave green oh quick develop ocean "
    "warm free minute strong special mind behind clear tail produce fact street inch "
    "multiply nothing course stay wheel full force blue object decide surface deep moon "
    "island foot system busy test record boat common gold possible plane stead dry wonder "
    "laugh thousand ago ran check game shape equate hot miss brought heat snow tire bring "
    "yes distant fill east paint language among"
)
_WORDS: tuple[str, ...] = tuple(_WORDS_TEXT.split())


class ApproxTokenizer:
    """A stand-in tokenizer: one common English word is one token.

    An approximation, documented as such: for Llama-style BPE vocabularies each word
    here (with its leading space) is one token, so prompts come out close to the
    requested token counts without loading a real tokenizer. Id 0 plays the BOS/special
    token; ``num_special_tokens`` (default 1, Llama's BOS) is what the server adds.
    :class:`tui.load.tokenizer.HfTokenizer` is the exact one, from ``tokenizer.json``.
    """

    SPECIAL = "<s>"

    def __init__(self, num_special_tokens: int = 1) -> None:
        if num_special_tokens < 0:
            raise ValueError("num_special_tokens must be >= 0")
        self._num_special = num_special_tokens
        # dict.fromkeys: ids must be unique per word for decode/encode to round-trip.
        self._vocab: tuple[str, ...] = (self.SPECIAL, *dict.fromkeys(_WORDS))
        self._ids = {word: i for i, word in enumerate(self._vocab)}

    @property
    def vocab_size(self) -> int:
        """Number of ids, the special one included."""
        return len(self._vocab)

    @property
    def all_special_ids(self) -> Sequence[int]:
        """Only id 0."""
        return (0,)

    def num_special_tokens_to_add(self) -> int:
        """The BOS the server prepends (configurable)."""
        return self._num_special

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Whitespace-split words to ids; an unknown word maps to the special id."""
        ids = [self._ids.get(word, 0) for word in text.split()]
        if add_special_tokens:
            ids = [0] * self._num_special + ids
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """Ids to space-joined words, special ids dropped."""
        return " ".join(self._vocab[int(i)] for i in ids if int(i) != 0)

    def count(self, text: str) -> int:
        """Approximate token count of generated text (words)."""
        return len(text.split())


@dataclass(frozen=True)
class PromptRequest:
    """One prompt to send: its text, its token count and the output length asked for."""

    index: int
    prompt: str
    prompt_len: int
    expected_output_len: int


def sample_lengths(
    rng: np.random.Generator,
    num_requests: int,
    range_ratio: float,
    input_len: int,
    output_len: int,
    tokenizer: Tokenizer,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(input_lens, output_lens, offsets)`` as ``get_sampling_params`` draws them.

    Mirrors ``datasets/utils.py:62-98``: the ranges are
    ``[floor(real·(1−r)), ceil(real·(1+r))]`` for input (``real`` excludes the special
    tokens) and ``[max(1, floor(out·(1−r))), ceil(out·(1+r))]`` for output, each drawn
    with ``rng.integers(lo, hi + 1)``; then one offset in ``[0, vocab_size)`` each.
    """
    if not 0.0 <= range_ratio < 1.0:
        raise ValueError("range_ratio must be in [0, 1).")
    real_input_len = max(0, int(input_len) - int(tokenizer.num_special_tokens_to_add()))
    input_low = math.floor(real_input_len * (1 - range_ratio))
    input_high = math.ceil(real_input_len * (1 + range_ratio))
    output_low = max(math.floor(output_len * (1 - range_ratio)), 1)
    output_high = max(math.ceil(output_len * (1 + range_ratio)), 1)
    input_lens = rng.integers(input_low, input_high + 1, size=num_requests)
    output_lens = rng.integers(output_low, output_high + 1, size=num_requests)
    offsets = rng.integers(0, tokenizer.vocab_size, size=num_requests)
    return input_lens, output_lens, offsets


def decode_to_target_len(
    tokenizer: Tokenizer,
    token_sequence: list[int],
    target_token_len: int,
    rng: np.random.Generator,
    max_retry: int = MAX_RETRY,
) -> tuple[str, list[int], int]:
    """``(prompt, ids, mismatch)``: decode, re-encode, pad or truncate to the target.

    Mirrors ``gen_prompt_decode_to_target_len`` (``datasets.py:494-547``); ``mismatch``
    is ``len(ids) - target`` when the retry budget ran out, else 0.
    """
    remaining = max_retry
    mismatch = 0
    while True:
        prompt = tokenizer.decode(token_sequence)
        token_sequence = tokenizer.encode(prompt, add_special_tokens=False)
        if remaining <= 0:
            if len(token_sequence) != target_token_len:
                mismatch = len(token_sequence) - target_token_len
            break
        if len(token_sequence) == target_token_len:
            break
        if len(token_sequence) < target_token_len:
            extra = rng.integers(
                0, tokenizer.vocab_size, size=target_token_len - len(token_sequence)
            ).tolist()
            token_sequence.extend(extra)
        else:
            token_sequence = token_sequence[:target_token_len]
        remaining -= 1
    return prompt, token_sequence, mismatch


def random_prompts(spec: LoadSpec, tokenizer: Tokenizer | None = None) -> list[PromptRequest]:
    """The ``spec.num_prompts`` random prompts of ``spec``, seeded by ``spec.seed``.

    Follows ``RandomDataset.sample`` (``datasets.py:555-764``), including its check that
    at least one input token remains after the special tokens and the range ratio.
    """
    tok: Tokenizer = tokenizer if tokenizer is not None else ApproxTokenizer()
    rng = np.random.default_rng(spec.seed)
    num_special = int(tok.num_special_tokens_to_add())
    real_input_len = max(0, spec.input_len - num_special)
    min_total = spec.prefix_len + math.floor(real_input_len * (1.0 - spec.range_ratio))
    if min_total < 1:
        raise LoadError(
            f"input_len {spec.input_len} is too small: with {num_special} special token(s) "
            f"and range ratio {spec.range_ratio} the smallest prompt (prefix + sampled) "
            f"would have {min_total} tokens. Raise input_len or prefix_len, or lower the "
            "range ratio."
        )
    input_lens, output_lens, offsets = sample_lengths(
        rng, spec.num_prompts, spec.range_ratio, spec.input_len, spec.output_len, tok
    )
    special = set(int(i) for i in tok.all_special_ids)
    allowed = np.array([i for i in range(tok.vocab_size) if i not in special])

    prefix: list[int] = []
    if spec.prefix_len > 0:
        drawn = allowed[rng.integers(0, len(allowed), size=spec.prefix_len)].tolist()
        _, prefix, _ = decode_to_target_len(tok, drawn, spec.prefix_len, rng)

    prompts: list[PromptRequest] = []
    for i in range(spec.num_prompts):
        body_len = int(input_lens[i])
        body = allowed[(int(offsets[i]) + i + np.arange(body_len)) % len(allowed)].tolist()
        text, ids, _ = decode_to_target_len(tok, prefix + body, spec.prefix_len + body_len, rng)
        prompts.append(
            PromptRequest(
                index=i,
                prompt=text,
                prompt_len=len(ids),
                expected_output_len=int(output_lens[i]),
            )
        )
    return prompts
