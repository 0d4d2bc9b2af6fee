"""A model folder like the provisioned tiny Llama (config.json, tokenizer.json, template).

Built with the ``tokenizers`` library in a fraction of a second, on the corpus and with the
special tokens and chat template of ``tui.server.tiny_model_builder`` (which builds the
real-vLLM test models), so the simulator's tokenizer tests run on a clean checkout without
the provisioned vLLM. No weights: the simulator does not need them.
"""

from __future__ import annotations

import json
from pathlib import Path

from tui.server.tiny_model_builder import BOS, CHAT_TEMPLATE, CORPUS, EOS, PAD, ROLE_TOKENS


def write_tiny_model(folder: Path, vocab_size: int = 600, max_positions: int = 4096) -> Path:
    """Write a Llama-shaped model folder with a trained byte-level BPE tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    folder.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[BOS, EOS, PAD, *ROLE_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = [ln for ln in CORPUS.splitlines() if ln.strip()]
    tok.train_from_iterator(lines * 4, trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
            ),
        ]
    )
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "bos_token": BOS,
                "eos_token": EOS,
                "pad_token": PAD,
                "extra_special_tokens": ROLE_TOKENS,
                "model_max_length": max_positions,
                "clean_up_tokenization_spaces": False,
            }
        ),
        encoding="utf-8",
    )
    (folder / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
    config = {
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "max_position_embeddings": max_positions,
        "vocab_size": tok.get_vocab_size(),
        "bos_token_id": bos_id,
        "eos_token_id": tok.token_to_id(EOS),
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder
