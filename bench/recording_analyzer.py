"""The project's policy pack, served exactly as `policy/analyzer` serves it, recording what the engine sends.

`bench/analyzer` runs this in place of `python -m pulumi.policy <engine> policy/`. Before serving, it
wraps the analyzer servicer's `Analyze` and `AnalyzeStack` so each request (the serialized protobuf the
engine sent: type, properties, URN, name, options, provider) is appended, with the seconds the real
handler took for it, to the JSON-lines file named by $BENCH_POLICY_RECORD. The policies, their
configuration and the answers are untouched. `bench.policy_cost` replays the recorded requests.
"""

from __future__ import annotations

import base64
import json
import os
import runpy
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RECORD_ENV = "BENCH_POLICY_RECORD"


def install_recorder(record: Path) -> None:
    """Wrap the servicer's Analyze and AnalyzeStack so they append each request to `record`."""
    from policy.gpu_allocation.rules.sdk_internals import AnalyzerServicer

    lock = threading.Lock()

    def wrap(method_name: str) -> Any:
        original = getattr(AnalyzerServicer, method_name)

        def recorded(self: Any, request: Any, context: Any) -> Any:
            started = time.perf_counter()
            response = original(self, request, context)
            seconds = time.perf_counter() - started
            line = json.dumps(
                {
                    "method": method_name,
                    "seconds": seconds,
                    "request": base64.b64encode(request.SerializeToString()).decode(),
                }
            )
            with lock, record.open("a") as handle:
                handle.write(line + "\n")
            return response

        return recorded

    for name in ("Analyze", "AnalyzeStack"):
        setattr(AnalyzerServicer, name, wrap(name))


def main() -> None:
    """Serve the pack (argv[1] is the engine address), recording requests when $BENCH_POLICY_RECORD is set."""
    record = os.environ.get(RECORD_ENV)
    if record:
        install_recorder(Path(record))
    sys.argv = ["pulumi.policy", sys.argv[1], str(ROOT / "policy")]
    runpy.run_module("pulumi.policy", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
