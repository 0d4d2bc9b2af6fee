"""The model's own ``tokenizer.json``, used the way vLLM 0.32's API server uses it.

Read with the ``tokenizers`` library (the Rust tokenizer transformers' fast tokenizers wrap)
and rendered chat templates with ``jinja2`` in transformers' sandbox settings, so every count
matches a real server on the same files (the CPU captures show: ``/tokenize`` of "hello there
world" is ``[0, 263, 286, 84, 267, 265, 283, 292, 348]`` on the tiny Llama, the chat prompt
``[0, 4, 204, ..., 5, 204]``):

- completions prompts: ``encode(text, add_special_tokens=True)``; the tokenizer's
  post-processor adds BOS where the model has one (``renderers``, vLLM's default);
- chat prompts: the template rendered with ``messages``, the special tokens of
  ``tokenizer_config.json`` and ``add_generation_prompt``, then encoded with
  ``add_special_tokens=False`` (vLLM's default for chat, so BOS comes from the template);
- ``/detokenize`` keeps special tokens; ``token_strs`` are the vocabulary strings.

The template comes from ``--chat-template`` (a file or inline text), else the model
folder's ``chat_template.jinja``, else ``tokenizer_config.json``'s ``chat_template`` (a
string or a list of named templates, ``default`` first), as transformers loads it. Without
one, chat requests fail with transformers' error text, as on vLLM.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from tui.sim.tokenizer import GEN_WORDS, ChatTemplateError, message_text
from tui.store.bounded_read import UntrustedFileError, parse_json, read_text

NO_TEMPLATE = (
    "As of transformers v4.44, default chat template is no longer allowed, so you must "
    "provide a chat template if the tokenizer does not define one."
)
_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token")


class TokenizerLoadError(ValueError):
    """``tokenizer.json`` (or its config) cannot be read."""


def _content(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a file; ``False`` for a name the system cannot look up (too long)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _read_json(path: Path) -> dict[str, Any]:
    if not _is_file(path):
        return {}
    try:
        data = parse_json(read_text(path, what="tokenizer file"))
    except UntrustedFileError as exc:  # a FIFO, over the size bound, not UTF-8
        raise TokenizerLoadError(exc.one_line()) from exc
    except ValueError as exc:  # not JSON, nested too deep, a non-finite number
        raise TokenizerLoadError(f"cannot read {path}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def _template_text(folder: Path, config: dict[str, Any], override: str | None) -> str | None:
    if override:
        path = Path(override).expanduser()
        if not _is_file(path):  # inline template text (of any length), as vLLM takes it
            return override
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TokenizerLoadError(f"cannot read --chat-template {override}: {exc}") from exc
    jinja_file = folder / "chat_template.jinja"
    if jinja_file.is_file():
        try:
            return jinja_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TokenizerLoadError(f"cannot read {jinja_file}: {exc}") from exc
    template = config.get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default") or next(iter(named.values()), None)
    return template if isinstance(template, str) else None


class HfTokenizer:
    """A model's ``tokenizer.json`` behind the simulator's tokenizer protocol."""

    exact = True

    def __init__(
        self, backend: Any, config: dict[str, Any], template: str | None, description: str
    ) -> None:
        self._tok = backend
        self.description = description
        self._special_tokens = {
            key: text for key in _SPECIAL_KEYS if (text := _content(config.get(key))) is not None
        }
        eos = self._special_tokens.get("eos_token")
        eos_id = backend.token_to_id(eos) if eos else None
        self.eos_id = int(eos_id) if eos_id is not None else 0
        added = backend.get_added_tokens_decoder()
        self._special_ids = {int(i) for i, token in added.items() if token.special}
        self._template_text = template
        self._template: Any = None
        self._vocab: list[tuple[int, str]] | None = None

    @classmethod
    def from_dir(cls, folder: Path, chat_template: str | None = None) -> HfTokenizer:
        """Load ``folder/tokenizer.json`` (with ``tokenizer_config.json`` and the template)."""
        from tokenizers import Tokenizer as Backend

        path = folder / "tokenizer.json"
        try:
            backend = Backend.from_file(str(path))
        except Exception as exc:  # tokenizers raises a bare Exception for a malformed file
            raise TokenizerLoadError(f"cannot read {path}: {exc}") from exc
        config = _read_json(folder / "tokenizer_config.json")
        template = _template_text(folder, config, chat_template)
        return cls(backend, config, template, str(path))

    # -- prompts -----------------------------------------------------------------------------
    def prompt_ids(self, prompt: str | Sequence[int], add_special_tokens: bool = True) -> list[int]:
        """``encode(prompt, add_special_tokens)``; token-id prompts pass through."""
        if not isinstance(prompt, str):
            return [int(i) for i in prompt]
        return list(self._tok.encode(prompt, add_special_tokens=add_special_tokens).ids)

    def render_chat(
        self, messages: Sequence[dict[str, Any]], add_generation_prompt: bool = True
    ) -> str:
        """The chat template applied to ``messages``; :class:`ChatTemplateError` if it fails."""
        import jinja2

        if self._template_text is None:
            raise ChatTemplateError(NO_TEMPLATE)
        normalized = [
            {**m, "role": str(m.get("role", "user")), "content": message_text(m.get("content"))}
            for m in messages
        ]
        try:
            if self._template is None:
                self._template = _environment().from_string(self._template_text)
            return str(
                self._template.render(
                    messages=normalized,
                    add_generation_prompt=add_generation_prompt,
                    tools=None,
                    documents=None,
                    **self._special_tokens,
                )
            )
        except jinja2.TemplateError as exc:
            raise ChatTemplateError(str(exc)) from exc

    def chat_ids(
        self, messages: Sequence[dict[str, Any]], add_generation_prompt: bool = True
    ) -> list[int]:
        """The rendered template encoded without special tokens (the template has them)."""
        text = self.render_chat(messages, add_generation_prompt)
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    # -- ids -> text --------------------------------------------------------------------------
    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``, special tokens kept (``/detokenize``)."""
        return str(self._tok.decode([int(i) for i in ids], skip_special_tokens=False))

    def token_strs(self, ids: Sequence[int]) -> list[str]:
        """Vocabulary strings (``Ġthe`` for byte-level BPE), as ``/tokenize`` returns them."""
        return [self._tok.id_to_token(int(i)) or "" for i in ids]

    def generation_vocab(self) -> list[tuple[int, str]]:
        """The non-special tokens of the simulator's generated sentence, in order."""
        if self._vocab is None:
            text = " " + " ".join(GEN_WORDS)
            ids = self._tok.encode(text, add_special_tokens=False).ids
            seen: dict[int, str] = {}
            for i in ids:
                if i not in self._special_ids and i not in seen:
                    seen[int(i)] = self.decode([i])
            self._vocab = list(seen.items()) or [(self.eos_id, "")]
        return self._vocab


def _environment() -> Any:
    """transformers' chat-template environment (``utils/chat_template_utils.py``)."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise jinja2.TemplateError(message)

    def tojson(
        value: Any,
        ensure_ascii: bool = False,
        indent: int | None = None,
        separators: Any = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(
            value,
            ensure_ascii=ensure_ascii,
            indent=indent,
            separators=separators,
            sort_keys=sort_keys,
        )

    def strftime_now(fmt: str) -> str:
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env
