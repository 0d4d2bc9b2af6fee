"""Telemetry sources (NVML, DCGM-style and vLLM /metrics pages, psutil) and a poller.

Each source has one ``sample()`` method returning a plain sample from ``tui.domain.telemetry``
and never raises for an absent or unreachable source: absence is a status and a message.
``poller.Poller`` runs a source at an interval without ever overlapping itself.
"""
