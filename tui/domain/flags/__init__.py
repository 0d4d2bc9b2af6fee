"""The ``vllm serve`` flags: declared once (``serve``), vLLM's parser and defaults as data,
the one argv lexer, the one validation path, and the files and secrets that carry flags."""
