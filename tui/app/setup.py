"""``vtc setup-cpu-vllm``: provision the real CPU build of vLLM and print where it is."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tui.server import provision as prov


def cmd_setup_cpu_vllm(
    as_json: bool = True,
    *,
    force: bool = False,
    cache_dir: Path | None = None,
) -> int:
    """Provision, print the result, return the exit code (130 when interrupted).

    Progress goes to stderr; the result goes to stdout, as one JSON object when
    ``as_json`` (the default), else as ``key: value`` lines.
    """

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    try:
        result = prov.provision(cache_dir, force=force, log=log)
    except prov.ProvisionError as exc:
        log(f"setup-cpu-vllm failed: {exc}")
        return 1
    except KeyboardInterrupt:
        log("setup-cpu-vllm interrupted; re-run to resume")
        return 130
    if as_json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        for key, value in result.to_json().items():
            print(f"{key}: {value}")
    return 0
