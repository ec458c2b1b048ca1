"""One engine operation in a fresh interpreter: `python -m bench.engine_worker REQUEST.json`.

The request names the engine area (state dir, kubeconfig, toolchain), the work dir and stack, the
program (`project`: the real program, `configgroup`: one `yaml.v2.ConfigGroup` of given objects), the
operation (preview), the policy pack, if any, and optionally a file to write the preview's Kubernetes
objects to (from the engine events). The worker hosts the inline
program (Automation API), so the process tree the parent samples is this worker (the program), the
pulumi CLI, the Kubernetes provider and the policy analyzer. The last stdout line is the JSON result.

Timed: only the operation itself (`stack.preview()` etc.: the CLI's start, plugin start, the program,
the provider's dry runs, the analyzer), not the interpreter start, the imports or the stack selection.
CPU seconds: this process's (the inline program and the Automation API's servers hosting it) and its
reaped descendants' (CLI, provider, analyzer: RUSAGE_CHILDREN counts a grandchild once its parent has
waited for it), each as the difference over the operation.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STARTED = time.monotonic()
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from eks_hybrid_gpu import engine  # noqa: E402

RESULT_MARK = "BENCH-RESULT "


def configgroup_program(objects: list[dict[str, Any]], kubeconfig: str) -> Callable[[], None]:
    """The baseline: the rendered objects as one plain ConfigGroup, with the same provider settings."""

    def program() -> None:
        import pulumi
        import pulumi_kubernetes as k8s

        provider = k8s.Provider("cluster", kubeconfig=kubeconfig)
        k8s.yaml.v2.ConfigGroup("rendered", objs=objects, opts=pulumi.ResourceOptions(provider=provider))

    return program


def step_objects(events: list[Any]) -> list[dict[str, Any]]:
    """The Kubernetes objects of a preview: the inputs of each step of a Kubernetes custom resource.

    They are the objects the provider would send to the API server after Chart v4 rendering and the
    program's transforms (ownership stamps): apiVersion, kind, metadata, spec/data/rules. For this
    stack they are byte for byte the `inputs` that a real `up` records in the state (checked once for
    all 36 objects of the local stack; see bench/README.md). Providers and components carry no object.
    """
    objects = []
    for event in events:
        pre = getattr(event, "resource_pre_event", None)
        new = pre.metadata.new if pre is not None else None
        if new is not None and new.custom and new.type.startswith("kubernetes:") and new.inputs is not None:
            objects.append(dict(new.inputs))
    return objects


def _cpu_seconds() -> tuple[float, float]:
    """(this process, its reaped descendants)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def run(request: dict[str, Any], setup_started: float) -> dict[str, Any]:
    """Perform the requested operation; the measurements."""
    toolchain = engine.Toolchain(tuple(request["path_entries"]), Path(request["provider_binary"]))
    toolchain.activate()
    if request.get("record"):
        os.environ["BENCH_POLICY_RECORD"] = request["record"]
    env = engine.prepare(Path(request["state_dir"]), Path(request["kubeconfig"]), toolchain)
    program = None
    if request["program"] == "configgroup":
        objects = json.loads(Path(request["objects"]).read_text())
        program = configgroup_program(objects, request["kubeconfig"])
    stack = engine.stack(env, request["stack"], work_dir=Path(request["work_dir"]), program=program)
    packs = [request["policy_pack"]] if request.get("policy_pack") else None
    operation = request["operation"]
    started_monotonic = time.monotonic()
    setup = started_monotonic - setup_started
    started_cpu, started = _cpu_seconds(), time.perf_counter()
    if operation != "preview":
        msg = f"unknown operation {operation}"
        raise ValueError(msg)
    events: list[Any] = []
    result = stack.preview(
        color="never", policy_packs=packs, on_event=events.append if request.get("capture") else None
    )
    wall = time.perf_counter() - started
    own, children = _cpu_seconds()
    measured = {
        "wall_s": wall,
        "program_cpu_s": own - started_cpu[0],
        "engine_cpu_s": children - started_cpu[1],
        "started_monotonic": started_monotonic,
        "setup_s": setup,
        "changes": {str(getattr(kind, "value", kind)): count for kind, count in result.change_summary.items()},
    }
    if request.get("capture"):
        Path(request["capture"]).write_text(json.dumps(step_objects(events)))
    return measured


def main() -> int:
    """Worker entry point."""
    request = json.loads(Path(sys.argv[1]).read_text())
    print(RESULT_MARK + json.dumps(run(request, STARTED)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
