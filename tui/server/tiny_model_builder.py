"""Build tiny random-weight llama models that the CPU build of vLLM can serve.

Standalone script, run with the vLLM venv's own python (transformers, tokenizers and
torch live only there); it must not import ``tui``. ``tui.server.provision`` runs it as::

    <venv>/bin/python tiny_model_builder.py --out DIR --long-out DIR
    <venv>/bin/python tiny_model_builder.py --shape small --out DIR

The first writes two model directories with identical weights and tokenizer that differ
only in ``max_position_embeddings`` (4096 and 131072 by default); the second one
compute-bound model of about 50M parameters. Each prints one JSON line with what it
built. Everything is deterministic for a given ``--seed``; nothing is downloaded.

Why two shapes: the tiny one (449k parameters) is bound by Python and OS scheduling, not
compute, so its timings are noise (five identical loads read 2,498-4,809 tok/s on a 2-core
host, issue 27); the small one (hidden 768, 8 layers) spends its time in matrix
multiplies like a GPU server does, and repeats within a few percent, so a model of the
server (the twin) can be tested against it.

Shape constraints (from measurements on the CPU build of vLLM 0.32.0): head_dim must be
one of the CPU attention sizes (32, 64, 80, ...); head_dim 16 passes startup but kills the
engine on the first request. Tiny: hidden 128 / 4 heads = head_dim 32; small: hidden
768 / 12 heads = head_dim 64.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BOS = "<s>"
EOS = "</s>"
PAD = "<pad>"
ROLE_TOKENS = ["<|system|>", "<|user|>", "<|assistant|>"]

# One line, so no template whitespace leaks into prompts. A BOS starts the conversation,
# each message is "<|role|>\n content EOS \n", and the generation prompt opens the
# assistant turn. `content` is coerced with `string` so non-string content cannot crash.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first %}{{ bos_token }}{% endif %}"
    "{{ '<|' + message['role'] + '|>\n' + (message['content'] | string) + eos_token + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)

# Training text for the byte-level BPE. Written here so nothing is downloaded; varied
# enough to yield a few hundred merges.
CORPUS = """
The quick brown fox jumps over the lazy dog while the cat sleeps on the warm windowsill.
A language model predicts the next token from the tokens that came before it.
Serving engines batch many requests together to keep the accelerator busy.
The key value cache stores attention keys and values for every token in flight.
When the cache is full, the scheduler preempts requests and recomputes them later.
Throughput is measured in tokens per second; latency in milliseconds to the first token.
Hello! How are you today? I am fine, thank you. What would you like to talk about?
Please summarise the following paragraph in one sentence and list three key points.
You are a helpful assistant. Answer briefly and politely, and say when you are unsure.
The weather is sunny with a light breeze, and the forecast for tomorrow shows rain.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 16 32 64 128 256 512 1024 2048 4096 8192.
Prices rose by 3.5 percent in March, while wages grew by 2.1 percent over the year.
def main(argv):\n    return run(parse(argv))\nif __name__ == "__main__":\n    main(None)
for i in range(10): print(i * i, end=", ")  # squares of the first ten integers
{"model": "tiny-llama", "max_tokens": 64, "temperature": 0.7, "stream": true}
The river winds through the valley, past the old mill and the stone bridge.
Children played in the park until the street lights came on in the evening.
Engineers tune batch sizes, memory limits and parallelism to meet their targets.
Prefix caching reuses the cache blocks of a shared system prompt across requests.
Speculative decoding drafts several tokens and verifies them in one forward pass.
The library opens at nine in the morning and closes at six in the evening.
She wrote a letter to her grandmother describing the mountains and the lakes.
Bread, butter, cheese, apples, oranges, coffee, tea, milk, sugar and salt.
Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March.
Red orange yellow green blue indigo violet black white grey brown pink purple.
"""


@dataclass(frozen=True)
class Shape:
    """The transformer's sizes (the vocabulary is the tokenizer's)."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int

    @property
    def head_dim(self) -> int:
        """Per-head width: must be a CPU attention size (32, 64, 80, ...)."""
        return self.hidden // self.heads


SHAPES: dict[str, Shape] = {
    # Startup in seconds, timings bound by Python: for tests of behaviour.
    "tiny": Shape(hidden=128, intermediate=256, layers=2, heads=4, kv_heads=2),
    # ~51M parameters (~100 MB in bfloat16), compute-bound: for tests of timing.
    "small": Shape(hidden=768, intermediate=2048, layers=8, heads=12, kv_heads=4),
}


def build_tokenizer(vocab_size: int, max_length: int) -> Any:
    """Train a byte-level BPE tokenizer on CORPUS and wrap it for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    special = [BOS, EOS, PAD, *ROLE_TOKENS]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Repeat the corpus so pair counts are large enough to rank merges sensibly.
    lines = [ln for ln in CORPUS.splitlines() if ln.strip()]
    tok.train_from_iterator(lines * 4, trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    # Completions get a BOS through the post-processor (add_special_tokens=True); chat
    # prompts get it from the template and are encoded without special tokens.
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"{BOS} $A",
                pair=f"{BOS} $A {BOS} $B",
                special_tokens=[(BOS, bos_id)],
            ),
        ]
    )
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=ROLE_TOKENS,
        model_max_length=max_length,
        clean_up_tokenization_spaces=False,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def build_model(
    tokenizer: Any, max_positions: int, seed: int, dtype_name: str, shape: Shape = SHAPES["tiny"]
) -> Any:
    """Create a random-weight LlamaForCausalLM of ``shape`` sized for the tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        # Exactly the tokenizer's size: a larger vocab lets the random model sample ids
        # that have no token, which breaks detokenisation.
        vocab_size=len(tokenizer),
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        max_position_embeddings=max_positions,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    dtype = getattr(torch, dtype_name)
    model = LlamaForCausalLM(config).to(dtype)
    model.eval()
    return model


def _check(tokenizer: Any, model: Any) -> dict[str, Any]:
    """Round-trip text and the chat template, and run one forward pass."""
    import torch

    text = "Hello! How are you today?"
    ids = tokenizer(text)["input_ids"]
    if ids[0] != tokenizer.bos_token_id:
        raise SystemExit(f"tokenizer does not add BOS: {ids[:4]}")
    decoded = tokenizer.decode(ids, skip_special_tokens=True)
    if decoded != text:
        raise SystemExit(f"tokenizer round trip failed: {decoded!r} != {text!r}")
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": text},
    ]
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    expected = f"{BOS}<|system|>\nYou are terse.{EOS}\n<|user|>\n{text}{EOS}\n<|assistant|>\n"
    if prompt != expected:
        raise SystemExit(f"chat template renders {prompt!r}, expected {expected!r}")
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits
    if tuple(logits.shape) != (1, len(ids), model.config.vocab_size):
        raise SystemExit(f"unexpected logits shape {tuple(logits.shape)}")
    return {"prompt_tokens": len(ids), "chat_prompt": prompt}


def _patch_max_positions(model_dir: Path, max_positions: int) -> None:
    """Rewrite a saved model's context length in config.json and tokenizer_config.json."""
    config_path = model_dir / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["max_position_embeddings"] = max_positions
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tok_path = model_dir / "tokenizer_config.json"
    if tok_path.is_file():
        tok_config = json.loads(tok_path.read_text(encoding="utf-8"))
        tok_config["model_max_length"] = max_positions
        tok_path.write_text(json.dumps(tok_config, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Build the models; print one JSON line describing them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, required=True, help="model directory to write")
    parser.add_argument(
        "--long-out", type=Path, help="also write a copy with --long-max-positions here"
    )
    parser.add_argument("--max-positions", type=int, default=4096)
    parser.add_argument("--long-max-positions", type=int, default=131072)
    parser.add_argument("--vocab-size", type=int, default=600)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    args = parser.parse_args(argv)

    for out in (args.out, args.long_out):
        if out is not None and out.exists() and any(out.iterdir()):
            parser.error(f"{out} exists and is not empty")

    tokenizer = build_tokenizer(args.vocab_size, args.max_positions)
    shape = SHAPES[args.shape]
    model = build_model(tokenizer, args.max_positions, args.seed, args.dtype, shape)
    checked = _check(tokenizer, model)

    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    # Pin the saved config's key fields: vLLM reads them from config.json, and
    # transformers versions differ in what they write by default.
    _patch_max_positions(args.out, args.max_positions)

    result: dict[str, Any] = {
        "model": str(args.out),
        "vocab_size": len(tokenizer),
        "dtype": args.dtype,
        "shape": args.shape,
        "max_position_embeddings": args.max_positions,
        "parameters": sum(p.numel() for p in model.parameters()),
        **checked,
    }
    if args.long_out is not None:
        # Same weights and tokenizer; only the declared context length differs.
        shutil.copytree(args.out, args.long_out, dirs_exist_ok=True)
        _patch_max_positions(args.long_out, args.long_max_positions)
        result["model_long"] = str(args.long_out)
        result["long_max_position_embeddings"] = args.long_max_positions
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
