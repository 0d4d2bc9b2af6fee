"""The model's own tokenizer for building prompts, from its ``tokenizer.json``.

``vllm bench serve`` builds random prompts with the model's Hugging Face tokenizer
(reference 4.5). :class:`HfTokenizer` gives the same answers from the same
``tokenizer.json`` with the small ``tokenizers`` library (no transformers, no torch):

- ``vocab_size`` is the base vocabulary without added tokens
  (``get_vocab_size(with_added_tokens=False)``, as ``PreTrainedTokenizerFast.vocab_size``);
- ``all_special_ids`` are the ids of the special tokens that ``tokenizer_config.json``
  names (bos, eos, unk, sep, pad, cls, mask and the additional/extra special tokens), as
  transformers' ``all_special_ids``; without that file, every added token marked special;
- ``num_special_tokens_to_add()`` asks the post-processor (Llama: 1, the BOS);
- ``decode`` keeps special tokens (transformers' default ``skip_special_tokens=False``)
  and applies ``clean_up_tokenization_spaces`` when the config asks for it.

``tokenizers`` is optional: :func:`load_tokenizer` falls back to
:class:`~tui.load.prompts.ApproxTokenizer` (one common English word per token) when it
is not installed or no ``tokenizer.json`` is found; the runner then reports how far the
client's prompt sizes were from the server's ``usage.prompt_tokens``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tui.load.prompts import ApproxTokenizer, Tokenizer
from tui.store.bounded_read import parse_json, read_text
from tui.store.hf_cache import find_snapshot_file
from tui.store.regular_file import is_regular_file, local_path

APPROX_NAME = "approx (one common English word per token)"

# tokenizer_config.json keys naming special tokens (transformers' SPECIAL_TOKENS_ATTRIBUTES).
_SPECIAL_KEYS = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)
_EXTRA_KEYS = ("additional_special_tokens", "extra_special_tokens")


def _token_content(value: Any) -> str | None:
    """A special token as the config writes it: a string or ``{"content": ...}``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _clean_up_tokenization(text: str) -> str:
    """transformers' ``clean_up_tokenization``: no space before punctuation/contractions."""
    for before, after in (
        (" .", "."),
        (" ?", "?"),
        (" !", "!"),
        (" ,", ","),
        (" ' ", "'"),
        (" n't", "n't"),
        (" 'm", "'m"),
        (" 's", "'s"),
        (" 've", "'ve"),
        (" 're", "'re"),
    ):
        text = text.replace(before, after)
    return text


class HfTokenizer:
    """A ``tokenizer.json`` behind the :class:`~tui.load.prompts.Tokenizer` protocol."""

    def __init__(self, backend: Any, config: dict[str, Any] | None = None, name: str = "") -> None:
        self._tok = backend
        self.name = name
        config = config or {}
        self._cleanup = bool(config.get("clean_up_tokenization_spaces", False))
        self._vocab_size = int(backend.get_vocab_size(with_added_tokens=False))
        self._special = self._special_ids(backend, config)
        processor = backend.post_processor
        self._num_special = (
            int(processor.num_special_tokens_to_add(False)) if processor is not None else 0
        )

    @staticmethod
    def _special_ids(backend: Any, config: dict[str, Any]) -> tuple[int, ...]:
        names: list[str] = []
        if config:
            for key in _SPECIAL_KEYS:
                if (content := _token_content(config.get(key))) is not None:
                    names.append(content)
            for key in _EXTRA_KEYS:
                extra = config.get(key)
                values = extra.values() if isinstance(extra, dict) else extra or []
                names.extend(c for v in values if (c := _token_content(v)) is not None)
            ids = [backend.token_to_id(name) for name in names]
            return tuple(dict.fromkeys(i for i in ids if i is not None))
        decoder = backend.get_added_tokens_decoder()
        return tuple(sorted(i for i, token in decoder.items() if token.special))

    @classmethod
    def from_dir(cls, directory: str | os.PathLike[str]) -> HfTokenizer:
        """Load ``tokenizer.json`` (and ``tokenizer_config.json`` if present) from a folder.

        Raises ``ImportError`` without the ``tokenizers`` library and ``FileNotFoundError``
        without ``tokenizer.json``.
        """
        from tokenizers import Tokenizer as Backend  # optional dependency

        folder = Path(directory)
        path = folder / "tokenizer.json"
        if not is_regular_file(path):
            raise FileNotFoundError(f"no tokenizer.json in {folder}")
        config: dict[str, Any] = {}
        config_path = folder / "tokenizer_config.json"
        if is_regular_file(config_path):
            loaded = parse_json(read_text(config_path, what="tokenizer config"))
            config = loaded if isinstance(loaded, dict) else {}
        return cls(Backend.from_file(str(path)), config, name=str(folder))

    @property
    def vocab_size(self) -> int:
        """Base vocabulary size (added tokens excluded)."""
        return self._vocab_size

    @property
    def all_special_ids(self) -> Sequence[int]:
        """Ids of the special tokens the config names."""
        return self._special

    def num_special_tokens_to_add(self) -> int:
        """Tokens the server adds to a single prompt (the post-processor's count)."""
        return self._num_special

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Text to ids."""
        return list(self._tok.encode(text, add_special_tokens=add_special_tokens).ids)

    def decode(self, ids: Sequence[int]) -> str:
        """Ids to text, special tokens kept (transformers' default)."""
        text = str(self._tok.decode([int(i) for i in ids], skip_special_tokens=False))
        return _clean_up_tokenization(text) if self._cleanup else text

    def count(self, text: str) -> int:
        """Tokens of ``text`` without special tokens (bench serve's fallback count)."""
        return len(self._tok.encode(text, add_special_tokens=False).ids)


def hub_snapshot(model: str, cache_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The local Hugging Face cache snapshot of ``model`` holding a tokenizer.json.

    Found by the one cache resolver (:func:`tui.store.hf_cache.find_snapshot_file`:
    ``$HF_HUB_CACHE``, ``$HF_HOME/hub``, ``$XDG_CACHE_HOME/huggingface/hub``...); never
    downloads.
    """
    if "/" not in model or model.startswith(("/", ".")):
        return None
    hub = Path(cache_dir) if cache_dir is not None else None
    found = find_snapshot_file(model, "tokenizer.json", hub=hub)
    return found.parent if found is not None else None


def load_tokenizer(model: str | None, tokenizer: str | None = None) -> tuple[Tokenizer, str]:
    """``(tokenizer, description)`` for building prompts for ``model``.

    ``tokenizer`` (a folder, as bench serve's ``--tokenizer``) wins over ``model``; either
    may be a local folder or a hub id already in the local Hugging Face cache. Falls back
    to :class:`~tui.load.prompts.ApproxTokenizer` when ``tokenizers`` is missing or no
    ``tokenizer.json`` is found; ``description`` says which one was used.
    """
    for candidate in (tokenizer, model):
        if not candidate:
            continue
        folder = local_path(candidate)
        # A model id is not always a path: one over 255 bytes is "not a local folder".
        if folder is None or not is_regular_file(folder / "tokenizer.json"):
            folder = hub_snapshot(candidate)
        if folder is None:
            continue
        try:
            return HfTokenizer.from_dir(folder), str(folder)
        except Exception:  # no library, unreadable or malformed file: try the next, then fall back
            continue
    return ApproxTokenizer(), APPROX_NAME
