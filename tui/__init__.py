"""vtc, the vLLM tuning console."""

__version__ = "0.1.0"
