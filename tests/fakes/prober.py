"""A scripted :class:`~tui.server.probe.HealthProber`: answers without HTTP."""

from __future__ import annotations

from collections.abc import Callable


class FakeProber:
    """``/health`` answers ``health`` (a status, or a function of the call count);
    ``/v1/models`` lists ``models`` (``None``: cannot tell). Both may be changed while a
    backend watches; :attr:`calls` and :attr:`urls` record what was asked."""

    def __init__(
        self,
        health: int | Callable[[int], int | None] | None = 200,
        models: list[str] | None = None,
    ) -> None:
        self.health_answer = health
        self.models_listed = models
        self.calls = 0
        self.urls: list[str] = []

    @property
    def status(self) -> int | Callable[[int], int | None] | None:
        """What ``/health`` answers now (settable)."""
        return self.health_answer

    @status.setter
    def status(self, value: int | None) -> None:
        self.health_answer = value

    async def health(self, url: str) -> int | None:
        self.calls += 1
        self.urls.append(url)
        answer = self.health_answer
        return answer(self.calls) if callable(answer) else answer

    async def models(self, url: str) -> list[str] | None:
        return self.models_listed
