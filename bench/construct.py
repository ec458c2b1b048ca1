"""Program construction under Pulumi mocks: config validation plus the whole component graph.

A worker: `python -m bench.construct N` runs the program once for the synthetic stack of N cohorts in a
fresh interpreter and prints one JSON object. The parent starts one worker per repetition, so no run
inherits another's heap, arenas or Pulumi runtime state.

The run is `components.program.run` through `eks_hybrid_gpu.mocks.run_program`: config read from
Pulumi config and validated (twice, as the program does), every component and Kubernetes resource
registered with the mock monitor, outputs resolved. Before it: the imports, and a touch of every lazily
loaded pulumi_kubernetes module the program uses, so the run does not pay for module loading.

- wall and CPU seconds (`perf_counter`, `process_time`) and the part of them spent in the cyclic garbage
  collector (gc callbacks; the collector stays on, as in a real run);
- peak memory: the process's resident-set high-water mark during the run (VmHWM, what `ru_maxrss`
  reports, reset just before the run through /proc/self/clear_refs) minus its resident set right before
  the run. This counts everything the run touches — Python objects, protobuf messages, grpc buffers —
  at no slowdown. tracemalloc was tried and rejected: it slows this workload 5-6x and misses memory that
  C extensions allocate themselves. Plain ru_maxrss was rejected too: ~75 MiB of it is the imported
  modules, which no cohort changes and which would hide the growth this benchmark is about.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pulumi  # noqa: E402
import pulumi_kubernetes as k8s  # noqa: E402

import components.program  # noqa: E402, F401
from bench.synthetic import synthetic_config  # noqa: E402
from eks_hybrid_gpu.mocks import RecordingMocks, run_program  # noqa: E402

LAZY_MODULES = (
    k8s.helm.v4.Chart,
    k8s.core.v1.ConfigMap,
    k8s.core.v1.Namespace,
    k8s.batch.v1.Job,
    k8s.node.v1.RuntimeClass,
    k8s.apiextensions.CustomResource,
    k8s.Provider,
)
"""Touching these loads the pulumi_kubernetes submodules the program uses, before the measured run."""


@dataclass
class CountingMocks(RecordingMocks):
    """Mocks that count registrations instead of keeping their inputs (the recorder is not under test)."""

    count: int = field(default=0)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        """Count; echo inputs as outputs, as the test mocks do."""
        self.count += 1
        return f"{args.name}-id", dict(args.inputs)


class GcClock:
    """Seconds spent in the cyclic garbage collector, from gc callbacks."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.collections[info["generation"]] += 1


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _reset_high_water_mark() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def one_run(config: dict[str, Any]) -> int:
    """Run the program once under fresh mocks; the number of registrations."""
    mocks = CountingMocks()
    run_program(config, "bench", mocks)
    return mocks.count


def measure(cohorts: int) -> dict[str, Any]:
    """One run of the synthetic stack of `cohorts` cohorts."""
    config = synthetic_config(cohorts)
    gc.collect()
    reset = _reset_high_water_mark()
    rss_before = _rss_kib()
    clock = GcClock()
    gc.callbacks.append(clock)
    started, started_cpu = time.perf_counter(), time.process_time()
    registrations = one_run(config)
    wall = time.perf_counter() - started
    cpu = time.process_time() - started_cpu
    gc.callbacks.remove(clock)
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {
        "cohorts": cohorts,
        "registrations": registrations,
        "wall_s": wall,
        "cpu_s": cpu,
        "gc_s": clock.seconds,
        "gc_collections": clock.collections,
        "rss_before_kib": rss_before,
        "max_rss_kib": max_rss,
        "peak_bytes": max(0, max_rss - rss_before) * 1024,
        "high_water_mark_reset": reset,
    }


def main(argv: list[str] | None = None) -> int:
    """Worker entry point: print one JSON object."""
    parser = argparse.ArgumentParser(description="one construction run in a fresh interpreter")
    parser.add_argument("cohorts", type=int)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.cohorts)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
