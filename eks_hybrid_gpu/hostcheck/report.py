"""Renders the host check: the inventory document (-o json|yaml) and the human table."""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from eks_hybrid_gpu.hostcheck import floors, labels, stamp
from eks_hybrid_gpu.hostcheck.collect import HostFacts
from eks_hybrid_gpu.outputs import typed
from eks_hybrid_gpu.tables import table_lines

if TYPE_CHECKING:
    from typing import Final

KIND: "Final" = "GpuHostInventory"
"""The document's kind; its apiVersion is every report's (eks_hybrid_gpu.outputs.API_VERSION)."""
EXIT_PASS: "Final" = 0
EXIT_FLOOR_NOT_MET: "Final" = 1
EXIT_CANNOT_INSPECT: "Final" = 2
PROBE_NOTE: "Final" = (
    "This check reads host metadata only; like nvidia-smi -L it confirms device visibility, not CUDA. "
    "Validate a bounded CUDA operation with payloads/cuda_probe.py in the cohort's smoke Job."
)


@dataclass(frozen=True)
class Outcome:
    """The result of one host check."""

    owner: floors.Owner
    mig: floors.MigExpectation
    facts: HostFacts
    checks: Tuple[floors.Check, ...]
    error: Optional[str]
    node_labels: Dict[str, str]

    @property
    def exit_code(self) -> int:
        """Return 2 when the host could not be inspected, 1 when a floor is not met, else 0."""
        if self.error is not None:
            return EXIT_CANNOT_INSPECT
        if any(check.status == "fail" for check in self.checks):
            return EXIT_FLOOR_NOT_MET
        return EXIT_PASS

    @property
    def result(self) -> str:
        """Return pass, fail or cannot-inspect."""
        return {EXIT_PASS: "pass", EXIT_FLOOR_NOT_MET: "fail"}.get(self.exit_code, "cannot-inspect")


def _floor_document(owner: floors.Owner) -> Dict[str, Any]:
    floor = floors.FLOORS[owner]
    return {
        "title": floor.title,
        "driverMajor": floor.driver_major,
        "containerToolkit": f"{floor.toolkit[0]}.{floor.toolkit[1]}" if floor.toolkit else None,
        "containerToolkitRequired": floor.toolkit_required,
        "nvidiaRuntimeHandlerRequired": floor.runtime_handler_required,
        "cdiRuntimeRequired": floor.cdi_required,
        "source": floor.source,
        "note": floors.FLOORS_NOTE,
    }


def inventory(outcome: Outcome) -> Dict[str, Any]:
    """Build the inventory document a stack config can reference to declare a cohort."""
    facts = outcome.facts
    runtime = facts.containerd
    return typed(
        KIND,
        {
            "checkedBy": {"tool": "eks-hybrid-gpu hostcheck", **stamp.stamped()},
            "hostname": facts.hostname,
            "owner": outcome.owner,
            "migExpectation": outcome.mig,
            "result": outcome.result,
            "exitCode": outcome.exit_code,
            "error": outcome.error,
            "gpus": [
                {
                    "index": gpu.index,
                    "model": gpu.model,
                    "memoryMiB": gpu.memory_mib,
                    "uuid": gpu.uuid,
                    "driverVersion": gpu.driver_version,
                    "migMode": gpu.mig_mode,
                    "migModePending": gpu.mig_mode_pending,
                    "pciBusId": gpu.pci_bus_id,
                    "computeCapability": gpu.compute_capability,
                }
                for gpu in facts.gpu.gpus
            ],
            "host": {
                "containerToolkitVersion": facts.toolkit_version,
                "containerd": {
                    "version": runtime.containerd_version,
                    "configFiles": list(runtime.files_read),
                    "configVersion": runtime.config_version,
                    "unimportedDropIns": list(runtime.unimported_dropins),
                    "nvidiaRuntimeHandler": runtime.runtime_handler,
                    "nvidiaRuntimeBinary": runtime.runtime_binary,
                    "defaultRuntime": runtime.default_runtime,
                    "cdiEnabled": runtime.cdi_enabled,
                    "cdiDecidedBy": runtime.cdi_source,
                },
                "cdi": {
                    "specDirs": [
                        {"path": cdi.path, "exists": cdi.exists, "files": list(cdi.files)} for cdi in facts.cdi_dirs
                    ],
                    "devices": [device for cdi in facts.cdi_dirs for device in cdi.devices],
                },
            },
            "floors": _floor_document(outcome.owner),
            "checks": [
                {"name": check.name, "status": check.status, "detail": check.detail, "fix": check.fix}
                for check in outcome.checks
            ],
            "nodeLabels": outcome.node_labels,
            "kubeletNodeLabelsFlag": labels.kubelet_flag(outcome.node_labels) if outcome.node_labels else None,
            "note": PROBE_NOTE,
        },
    )


def _yaml_scalar(value: str) -> str:
    """Quote values that YAML would otherwise read as a number or a boolean."""
    return f'"{value}"' if value.isdigit() or value.lower() in {"true", "false"} else value


def table(outcome: Outcome) -> str:
    """Render the human report: GPUs, checks with fixes, labels, and the verdict."""
    floor = floors.FLOORS[outcome.owner]
    lines = [
        f"eks-hybrid-gpu hostcheck on {outcome.facts.hostname}: owner {outcome.owner} ({floor.title})",
        f"Floors: {floor.source}. {floors.FLOORS_NOTE}",
        "",
    ]
    if outcome.error is not None:
        lines += [f"CANNOT INSPECT (exit {EXIT_CANNOT_INSPECT}): {outcome.error}"]
        return "\n".join(lines) + "\n"
    gpu_rows = [["GPU", "MODEL", "MEMORY MiB", "DRIVER", "MIG", "UUID"]]
    gpu_rows += [
        [str(g.index), g.model, str(g.memory_mib), g.driver_version, g.mig_mode or "n/a", g.uuid]
        for g in outcome.facts.gpu.gpus
    ]
    lines += [*table_lines(gpu_rows), ""]
    check_rows = [["CHECK", "RESULT", "DETAIL"]]
    check_rows += [[check.name, check.status.upper(), check.detail] for check in outcome.checks]
    lines += table_lines(check_rows)
    fixes = [check for check in outcome.checks if check.fix and check.status in ("fail", "warn")]
    if fixes:
        lines += ["", "To fix:"] + [f"  {check.name}: {check.fix}" for check in fixes]
    lines += ["", "Node labels this host should carry:"]
    lines += [f"  {key}: {_yaml_scalar(value)}" for key, value in outcome.node_labels.items()]
    lines += ["", PROBE_NOTE, ""]
    failed = sum(check.status == "fail" for check in outcome.checks)
    verdict = (
        f"Result: FAIL (exit {EXIT_FLOOR_NOT_MET}): {failed} check(s) below the floors for {outcome.owner}"
        if failed
        else f"Result: PASS (exit {EXIT_PASS}): the host meets the floors for {outcome.owner}"
    )
    lines.append(verdict)
    return "\n".join(lines) + "\n"
