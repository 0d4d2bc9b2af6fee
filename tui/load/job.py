"""What passes between the console and its load process: the job, then JSON lines back.

The console's load runs in its own process (``python -m tui.load.worker``, issue 23) so
the UI's event loop can never delay the load's clock. The console writes one
:class:`LoadJob` as a JSON line on the worker's stdin (the API key travels there, never
in argv or the environment of a command line), then at most one ``cancel`` line; the
worker answers with :class:`WorkerMessage` lines on its stdout: progress once an interval,
then exactly one result or error. Both sides validate every line with pydantic.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, TypeAdapter, field_serializer

from tui.domain.results import BenchResult
from tui.domain.url_credentials import UrlCredential
from tui.domain.workload import LoadProgress, LoadSpec

# Infinities and NaN (a stat over no requests) as strings both ways: they must read back.
_LINE = ConfigDict(frozen=True, ser_json_inf_nan="strings")

CANCEL_LINE = b"cancel\n"
"""The console's one other line on the worker's stdin: cut every stream, report what ran."""


class LoadJob(BaseModel):
    """One load, as the console asks for it: the workload, where, and its goodput SLOs.

    ``goodput`` (bench serve's ``--goodput`` thresholds, ms) travels with each request, so
    a sweep's SLOs never sit on a runner that the operator's own loads share.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    spec: LoadSpec
    base_url: str
    model: str
    goodput: dict[str, float] = Field(default_factory=dict)
    api_key: SecretStr | None = None
    # The server URL's user and password (sent as Basic authorization), stdin only too.
    url_user: SecretStr | None = None
    url_password: SecretStr | None = None
    progress_interval_s: float = Field(1.0, gt=0)

    def credential(self) -> UrlCredential | None:
        """The server URL's credential, when it had one."""
        if self.url_user is None:
            return None
        password = self.url_password.get_secret_value() if self.url_password else ""
        return UrlCredential(self.url_user.get_secret_value(), password)

    @field_serializer("api_key", "url_user", "url_password", when_used="json")
    def _reveal(self, key: SecretStr | None) -> str | None:
        # Written only to the worker's stdin pipe; repr and logs still show '**********'.
        return key.get_secret_value() if key is not None else None


class ProgressLine(BaseModel):
    """Live numbers, once an interval."""

    model_config = _LINE
    kind: Literal["progress"] = "progress"
    progress: LoadProgress


class ResultLine(BaseModel):
    """The load's typed result (partial when cancelled: ``result.cancelled``)."""

    model_config = _LINE
    kind: Literal["result"] = "result"
    result: BenchResult


class ErrorLine(BaseModel):
    """The load could not run: one line, and a hint when the error had one."""

    model_config = _LINE
    kind: Literal["error"] = "error"
    message: str
    hint: str = ""


WorkerMessage = Annotated[ProgressLine | ResultLine | ErrorLine, Field(discriminator="kind")]
"""One line of the worker's stdout."""

_MESSAGE: TypeAdapter[ProgressLine | ResultLine | ErrorLine] = TypeAdapter(WorkerMessage)


def encode(message: ProgressLine | ResultLine | ErrorLine) -> bytes:
    """One JSON line (infinities as strings, as stored runs write them)."""
    return message.model_dump_json().encode() + b"\n"


def decode(line: bytes) -> ProgressLine | ResultLine | ErrorLine:
    """A worker line, validated (``pydantic.ValidationError`` for anything else)."""
    return _MESSAGE.validate_json(line)
