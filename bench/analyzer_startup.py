"""Start-up time of the policy analyzer: from exec to the gRPC port it prints, when it is ready.

`policy/analyzer` is started as the engine starts it (the engine address as its argument; nothing
connects to it before it serves, so a dummy address does), and stopped once it printed its port. This is
the fixed part of the policy pack's cost: a Python interpreter importing pulumi, pulumi_policy, grpc
and the pack's rules, and building the policies.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from eks_hybrid_gpu import projectdir


def startup_seconds(analyzer: Path | None = None) -> float:
    """One start of policy/analyzer (this project's, or the one given), until it printed its port."""
    env = {**os.environ, "PULUMI_PYTHON_CMD": sys.executable}
    started = time.perf_counter()
    process = subprocess.Popen(
        [str(analyzer or projectdir.policy_pack()), "127.0.0.1:1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        elapsed = time.perf_counter() - started
    finally:
        process.kill()
        process.wait()
    if not line.strip().isdigit():
        msg = f"policy/analyzer did not print its port (got {line!r})"
        raise RuntimeError(msg)
    return elapsed
