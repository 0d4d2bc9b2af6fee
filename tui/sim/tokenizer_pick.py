"""Which tokenizer a simulated server counts with: the model's own ``tokenizer.json`` when
there is one (as vLLM does), else the approximation, and the start-up log's sentence why."""

from __future__ import annotations

from pathlib import Path

from tui.sim.hf_tokenizer import HfTokenizer, TokenizerLoadError
from tui.sim.tokenizer import APPROX_NOTE, ApproxTokenizer, Tokenizer


def load_tokenizer(
    folder: Path | None,
    vocab_size: int,
    adds_bos: bool = True,
    chat_template: str = "llama3",
    chat_template_file: str | None = None,
) -> tuple[Tokenizer, str]:
    """The model's ``tokenizer.json`` in ``folder`` when there is one, else the approximation.

    Returns the tokenizer and a sentence for the start-up log saying which one counts and,
    for the approximation, why. ``chat_template_file`` is ``--chat-template`` (a file or an
    inline template).
    """
    if folder is None:
        why = "no local folder or Hugging Face cache snapshot of this model"
    elif not (folder / "tokenizer.json").is_file():
        why = f"no tokenizer.json in {folder}"
    else:
        try:
            tok = HfTokenizer.from_dir(folder, chat_template_file)
        except TokenizerLoadError as exc:
            why = str(exc)
        else:
            return tok, f"Counting tokens with {folder / 'tokenizer.json'}, as vLLM does."
    approx = ApproxTokenizer(vocab_size, adds_bos, chat_template)
    return approx, f"{why}: {APPROX_NOTE}."
