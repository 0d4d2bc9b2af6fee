"""The sweep form: strategy, objective, the parameters to vary, the SLOs, the budget, and
where the trials run (this console's server, or a Ray cluster: issue 21).

The base is the run the sweep starts from (the flags form's flags and workload, given by
the main screen); :func:`tui.domain.sweep.compose.compose` turns the fields into a spec,
validated as a TOML spec is.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, Select

from tui.domain.flags.serve import ServeFlags
from tui.domain.sweep import SweepSpec
from tui.domain.sweep.cluster import ClusterChoice
from tui.domain.sweep.compose import ComposeError, compose
from tui.domain.sweep.spec import STRATEGY_LABELS
from tui.domain.workload import LoadSpec

STRATEGY_CHOICES = tuple((label, name) for name, label in STRATEGY_LABELS.items())
OBJECTIVE_CHOICES = (
    ("output tok/s", "output_throughput"),
    ("req/s", "request_throughput"),
    ("goodput", "goodput"),
)
DEFAULT_PARAMS = (
    ("max_num_seqs", "64, 128, 256"),
    ("max_num_batched_tokens", "1024, 2048, 4096"),
    ("", ""),
)
WHERE_CHOICES = (("this console", "console"), ("a Ray cluster", "ray"))
SLO_FIELDS = (
    ("p99_ttft_ms", "p99 TTFT ms"),
    ("p99_itl_ms", "p99 ITL ms"),
    ("p99_e2el_ms", "p99 E2EL ms"),
)


class SweepComposer(Vertical):
    """A compact form; :meth:`spec` reads it."""

    def __init__(
        self,
        flags: ServeFlags,
        load: LoadSpec,
        *,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self._flags, self._load = flags, load

    def compose(self) -> ComposeResult:
        """Strategy, objective, budget; three parameter rows; three SLO limits; where."""
        with Horizontal(classes="sweep-row"):
            yield Select(
                STRATEGY_CHOICES,
                value="search",
                allow_blank=False,
                compact=True,
                id="sweep-strategy",
            )
            yield Select(
                OBJECTIVE_CHOICES,
                value="output_throughput",
                allow_blank=False,
                compact=True,
                id="sweep-objective",
            )
            yield Label("starts", classes="sweep-label")
            yield Input("12", compact=True, id="sweep-starts", classes="sweep-small")
        for i, (name, values) in enumerate(DEFAULT_PARAMS):
            with Horizontal(classes="sweep-row"):
                yield Input(
                    name,
                    placeholder="flag",
                    compact=True,
                    id=f"sweep-pname-{i}",
                    classes="sweep-pname",
                )
                yield Input(
                    values,
                    placeholder="a, b, c  or  start..stop:step",
                    compact=True,
                    id=f"sweep-pvalues-{i}",
                    classes="sweep-pvalues",
                )
        with Horizontal(classes="sweep-row"):
            for key, label in SLO_FIELDS:
                yield Label(label, classes="sweep-label")
                yield Input(
                    "", placeholder="-", compact=True, id=f"sweep-{key}", classes="sweep-small"
                )
        with Horizontal(classes="sweep-row"):
            yield Label("trials on", classes="sweep-label")
            yield Select(
                WHERE_CHOICES, value="console", allow_blank=False, compact=True, id="sweep-where"
            )
            yield Input(
                "",
                placeholder="address; empty: local Ray",
                compact=True,
                id="sweep-ray-address",
                classes="sweep-pvalues",
            )
            yield Label("GPUs", classes="sweep-label")
            yield Input(
                "", placeholder="-", compact=True, id="sweep-ray-gpus", classes="sweep-small"
            )

    def set_base(self, flags: ServeFlags, load: LoadSpec) -> None:
        """The run the sweep starts from."""
        self._flags, self._load = flags, load

    def spec(self) -> SweepSpec:
        """The composed spec; ``ComposeError`` (one line) when a field is wrong."""
        params = {}
        for i in range(len(DEFAULT_PARAMS)):
            name = self.query_one(f"#sweep-pname-{i}", Input).value.strip()
            values = self.query_one(f"#sweep-pvalues-{i}", Input).value
            if name:
                params[name] = values
        slo: dict[str, float] = {}
        for key, label in SLO_FIELDS:
            text = self.query_one(f"#sweep-{key}", Input).value.strip()
            if text:
                slo[key] = _number(text, label)
        starts_text = self.query_one("#sweep-starts", Input).value.strip()
        starts = int(_number(starts_text, "starts")) if starts_text else None
        strategy = str(self.query_one("#sweep-strategy", Select).value)
        objective = str(self.query_one("#sweep-objective", Select).value)
        names = "-".join(params) or "sweep"
        return compose(
            name=f"console-{strategy}-{names}",
            flags=self._flags,
            load=self._load,
            strategy=strategy,
            objective=objective,
            parameters=params,
            slo=slo,
            max_starts=starts,
        )

    def cluster(self) -> ClusterChoice | None:
        """Where the trials run: ``None`` for this console's server, else the Ray cluster
        the last row names (an address to join, or a local instance declaring GPUs)."""
        if self.query_one("#sweep-where", Select).value != "ray":
            return None
        address = self.query_one("#sweep-ray-address", Input).value.strip() or None
        text = self.query_one("#sweep-ray-gpus", Input).value.strip()
        gpus = int(_number(text, "GPUs")) if text else None
        if gpus is not None and gpus < 1:
            raise ComposeError(f"GPUs: {text!r}: at least 1")
        return ClusterChoice(address=address, gpus=gpus)


def _number(text: str, label: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ComposeError(f"{label}: {text!r} is not a number") from None
