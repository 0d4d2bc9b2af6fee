"""Flag names shortened by word, for where a board is narrow (``gpu_memory_utilization`` ->
``gpu_mem_util``): ``vtc runs`` fitted to a terminal, the table's compact change column."""

from __future__ import annotations

_WORDS = {
    "memory": "mem",
    "utilization": "util",
    "batched": "batch",
    "tokens": "tok",
    "num": "n",
    "length": "len",
    "parallel": "par",
    "prefix": "pfx",
    "caching": "cache",
    "enable": "en",
    "chunked": "chunk",
    "pipeline": "pp",
    "tensor": "tp",
    "size": "sz",
}


def short_title(title: str) -> str:
    """A flag's name with its long words shortened (``max_num_batched_tokens`` ->
    ``max_n_batch_tok``)."""
    return "_".join(_WORDS.get(word, word) for word in title.split("_"))
