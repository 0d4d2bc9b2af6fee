"""The ``vllm:`` families a vLLM registers, read by running its own code (issue 19).

    python tools/vllm_metric_families.py VENV_PYTHON MODEL_DIR [--write FILE]

Runs under VENV_PYTHON (the CPU build of 0.32, or a newer vLLM's parser env): builds the
engine config of ``vllm serve MODEL_DIR`` as the server would (``EngineArgs.create_engine_config``,
``VLLM_TARGET_DEVICE=cpu``), then ``PrometheusStatLogger(config, [0])`` (what the API server
registers at start-up, ``v1/metrics/loggers.py``), and reads the registry back: once plain and
once with ``--kv-offloading-size 1``. Prints ``{"version", "plain", "kv_offloading_size"}``
(family names as the text parser names them: counters without ``_total``); ``--write`` puts
it into FILE (``tests/sim/captures/vllm_families_<version>.json``, which the simulator's tests
compare against). ``vllm:cache_config_info`` is registered later by the server
(``log_metrics_info``), so it is not in these lists.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# Runs under the target interpreter: it must not import vtc.
PROBE = r"""
import json, os, sys
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
import prometheus_client
prometheus_client.disable_created_metrics()
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from vllm.engine.arg_utils import EngineArgs
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
try:
    from vllm.entrypoints.common.cli_args import make_arg_parser  # 0.33
except ImportError:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser  # 0.32
from vllm.v1.metrics.loggers import PrometheusStatLogger
import vllm

def families(*extra):
    args = make_arg_parser(FlexibleArgumentParser()).parse_args(["--model", sys.argv[1], *extra])
    PrometheusStatLogger(EngineArgs.from_cli_args(args).create_engine_config(), [0])
    text = generate_latest(REGISTRY).decode()
    return [f.name for f in text_string_to_metric_families(text) if f.name.startswith("vllm:")]

out = {"version": vllm.__version__.split("+")[0], "plain": families(),
       "kv_offloading_size": families("--kv-offloading-size", "1")}
print("VTC-FAMILIES " + json.dumps(out))
"""


def read_families(python: str, model: str) -> dict[str, object]:
    """Run :data:`PROBE` under ``python`` for ``model``; its document."""
    done = subprocess.run(
        [python, "-c", PROBE, model], capture_output=True, text=True, timeout=600, check=False
    )
    for line in done.stdout.splitlines():
        if line.startswith("VTC-FAMILIES "):
            data: dict[str, object] = json.loads(line.removeprefix("VTC-FAMILIES "))
            return data
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    raise SystemExit(f"reading the families failed (exit {done.returncode}): {tail}")


def main(argv: list[str]) -> int:
    """``python tools/vllm_metric_families.py VENV_PYTHON MODEL_DIR [--write FILE]``."""
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--write"):
        print(__doc__, file=sys.stderr)
        return 2
    data = read_families(argv[0], argv[1])
    text = json.dumps(data, indent=1) + "\n"
    if len(argv) == 4:
        Path(argv[3]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
