"""The port is taken: uvicorn's ``[Errno 98] ... address already in use`` (and vLLM 0.7+'s
own socket bind, ``OSError: [Errno 98] Address already in use``)."""

from __future__ import annotations

import re
from typing import Any, Final

from tui.domain.diagnosis import Diagnosis, Fix
from tui.server.diagnose.common import make, port
from tui.server.diagnose.reading import LogView, tolerant

_PORT_IN_USE: Final = tolerant(
    r"\[Errno 98\] Address already in use|address already in use",
    "lready in use",
    "LREADY IN USE",
    flags=re.IGNORECASE,
)


def port_in_use_diagnosis(
    port_number: int, evidence: str, *, holder: str | None = None
) -> Diagnosis:
    """The ``port_in_use`` diagnosis; the supervisor's pre-launch check uses it too.

    The fix proposes ``port + 1``; the caller is expected to probe for a port that is free.
    """
    who = f" by {holder}" if holder else ""
    facts: dict[str, Any] = {"port": port_number}
    if holder:
        facts["holder"] = holder
    return Diagnosis(
        kind="port_in_use",
        summary=f"port {port_number} is already in use{who}",
        facts=facts,
        fixes=[Fix(title=f"Use port {port_number + 1}", set={"port": port_number + 1})]
        if port_number < 65535
        else [],
        evidence=evidence.strip(),
    )


# vLLM's own ports (get_open_port, torch.distributed's TCPStore): not the one --port sets.
_INTERNAL: Final = tolerant(
    r"in get_open_port|TCPStore|_create_c10d_store|MASTER_PORT|EADDRINUSE",
    "get_open_port",
    "TCPStore",
    "_create_c10d_store",
    "MASTER_PORT",
    "EADDRINUSE",
)


def port_in_use(log: LogView) -> Diagnosis | None:
    """The server could not bind its port (or one of vLLM's internal ports)."""
    found = log.find(_PORT_IN_USE)
    if not found:
        return None
    if log.find(_INTERNAL) is not None and not log.has("bind on address"):
        return make(
            log,
            "port_in_use",
            "a port vLLM picks for its own processes (distributed init) is taken, not --port: "
            "another vLLM or torch.distributed job on this machine holds it; stop it, or set "
            "VLLM_PORT to a free range",
            found[1],
            {"internal_port": True},
        )
    d = port_in_use_diagnosis(port(log), found[1])
    return make(log, d.kind, d.summary, d.evidence, d.facts, d.fixes)
