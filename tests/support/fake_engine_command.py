"""A command whose "engine" is a real child process that stops as `pulumi up` does on SIGINT, for Ctrl-C tests.

The child, like the Pulumi CLI, notes each SIGINT, finishes its step in flight (half a second), records that it
stopped cleanly and exits non-zero. The command runs it through the same `interruptible` as `local up`, `simulate up`
and `migrate` run the real engine. Its marker file records what the child saw, for the test to read.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from eks_hybrid_gpu.engine_interrupt import interruptible

ENGINE = """
import os, signal, sys, time
marker = sys.argv[1]
stopping = []
def noted(signum, frame):
    stopping.append(signum)
    with open(marker, "a") as out:
        out.write("SIGINT\\n")
signal.signal(signal.SIGINT, noted)
with open(marker, "a") as out:
    out.write("ready\\n")
deadline = time.monotonic() + (0 if os.environ.get("FAKE_ENGINE_QUICK") else 30)
while not stopping and time.monotonic() < deadline:
    time.sleep(0.02)
time.sleep(0.5)
with open(marker, "a") as out:
    out.write("stopped cleanly\\n" if stopping else "finished\\n")
sys.exit(255 if stopping else 0)
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`fake-up --marker FILE`."""
    parser.add_argument("--marker", required=True)


def run(args: argparse.Namespace) -> int:
    """Run the engine child; 0 when it finished."""
    interruptible(
        "`pulumi up` of stack fake",
        lambda: subprocess.run([sys.executable, "-c", ENGINE, args.marker], check=True),
    )
    return 0
