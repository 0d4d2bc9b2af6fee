"""The secrets the console handles, read once, with one precedence for every consumer.

Before this object, the load runner, the readiness probe, the adopted-server watcher and the
attached-server probe each picked an API key from the environment in their own order. Now a
mode reads the environment (and the secrets taken out of a serve command line) once into a
:class:`Credentials`, and every consumer asks it.

Precedence (documented in the README):

- **API key** the console sends (readiness probes, /v1/models, the load), and the key a
  server the console launches requires: a key given on the serve command line
  (``--api-key``, taken out of the argv before anything stores it) > ``VLLM_API_KEY`` >
  ``OPENAI_API_KEY``. A launched server gets it as ``VLLM_API_KEY`` (vLLM reads that
  variable as ``--api-key``'s default), never in its argv.
- **Hugging Face token**: ``--hf-token`` on the serve command line (taken out of the argv)
  > ``HF_TOKEN`` > ``HUGGING_FACE_HUB_TOKEN``; a launched server gets one given on the
  command line as ``HF_TOKEN``, the others by inheritance of the environment; never stored.

Values never appear in ``repr``: a credentials object may be logged by accident.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

API_KEY_ENV = "VLLM_API_KEY"
"""The variable vLLM reads as ``--api-key``'s default (reference section 1.3)."""
CLIENT_KEY_ENV = "OPENAI_API_KEY"
HF_TOKEN_ENVS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


@dataclass(frozen=True)
class Credentials:
    """API key and Hugging Face token, each with where it came from (for messages)."""

    api_key: str | None = field(default=None, repr=False)
    api_key_source: str = ""
    hf_token: str | None = field(default=None, repr=False)
    hf_token_given: bool = False  # on the command line: the server must be handed it

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], *, command_line: Mapping[str, str] | None = None
    ) -> Credentials:
        """Read ``env``; ``command_line`` holds secrets taken out of a serve line, by env name."""
        given = dict(command_line or {})
        api_key, source = None, ""
        for origin, value in (
            ("the serve command line (--api-key)", given.get(API_KEY_ENV)),
            (API_KEY_ENV, env.get(API_KEY_ENV)),
            (CLIENT_KEY_ENV, env.get(CLIENT_KEY_ENV)),
        ):
            if value:
                api_key, source = value, origin
                break
        given_hf = given.get(HF_TOKEN_ENVS[0])
        hf = given_hf or next((env[name] for name in HF_TOKEN_ENVS if env.get(name)), None)
        return cls(
            api_key=api_key, api_key_source=source, hf_token=hf, hf_token_given=bool(given_hf)
        )

    def server_env(self) -> dict[str, str]:
        """What a launched server's environment must add: the key vLLM will require, and a
        Hugging Face token given on the command line."""
        env = {API_KEY_ENV: self.api_key} if self.api_key else {}
        if self.hf_token and self.hf_token_given:
            env[HF_TOKEN_ENVS[0]] = self.hf_token
        return env

    def headers(self) -> dict[str, str]:
        """HTTP headers for requests to the server (empty without a key)."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
