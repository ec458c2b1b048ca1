"""What each Kubernetes minor EKS runs (1.34 to 1.37) does for GPU allocation: the one table of versions.

Read by the stack config, the preflight, the pack and `migrate`, so that they agree on what a version will do.

Source of the gate rows: `pkg/features/kube_features.go` of `k8s.io/kubernetes` v1.37.2 (its versioned feature
specs record every gate's default and maturity back to 1.26; each row below is copied from there, stages and all).
A gate's default at minor `m` is that of the last spec whose version is at most `m`. The gate must be on in every
component that acts on it: for `DRAExtendedResource` (KEP-5004) the API server (the DeviceClass field and the pod
status), the scheduler (placement through the mapping), the controller-manager and the kubelet (which prepares the
claim the scheduler made), so a cohort is judged by the older of the control plane and the cohort's kubelets.

Standard library only: the pack imports it and stays publishable on its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

Minor = tuple[int, int]
"""(1, 37): what a gate's default depends on; patch releases never change a default."""

DRA_EXTENDED_RESOURCE: Final = "DRAExtendedResource"
"""KEP-5004: a DeviceClass's `spec.extendedResourceName` lets a plain extended-resource request be served by DRA."""


@dataclass(frozen=True)
class GateStage:
    """One versioned spec of a feature gate, as kube_features.go writes it."""

    since: Minor
    default: bool
    stage: str
    """alpha, beta or GA."""
    locked: bool = False
    """LockToDefault: the gate can no longer be set against its default."""


DRA_GATES: Final[Mapping[str, tuple[GateStage, ...]]] = {
    "DynamicResourceAllocation": (
        GateStage((1, 26), False, "alpha"),
        GateStage((1, 32), False, "beta"),
        GateStage((1, 34), True, "GA"),
        GateStage((1, 35), True, "GA", locked=True),
    ),
    DRA_EXTENDED_RESOURCE: (
        GateStage((1, 34), False, "alpha"),
        GateStage((1, 36), True, "beta"),
        GateStage((1, 37), True, "GA", locked=True),
    ),
    "DRAAdminAccess": (
        GateStage((1, 32), False, "alpha"),
        GateStage((1, 34), True, "beta"),
        GateStage((1, 36), True, "GA", locked=True),
    ),
    "DRAPrioritizedList": (
        GateStage((1, 33), False, "alpha"),
        GateStage((1, 34), True, "beta"),
        GateStage((1, 36), True, "GA"),
        GateStage((1, 37), True, "GA", locked=True),
    ),
    "DRAConsumableCapacity": (GateStage((1, 34), False, "alpha"), GateStage((1, 36), True, "beta")),
    "DRAPartitionableDevices": (GateStage((1, 33), False, "alpha"), GateStage((1, 36), True, "beta")),
    "DRADeviceTaints": (
        GateStage((1, 33), False, "alpha"),
        GateStage((1, 36), True, "beta"),
        GateStage((1, 37), True, "GA"),
    ),
    "DRAResourceClaimDeviceStatus": (
        GateStage((1, 32), False, "alpha"),
        GateStage((1, 33), True, "beta"),
        GateStage((1, 37), True, "GA", locked=True),
    ),
}
"""The DRA gates the program, its config or the pack rely on, per kube_features.go at v1.37.2."""

EKS_MINORS: Final[tuple[Minor, ...]] = ((1, 34), (1, 35), (1, 36), (1, 37))
"""The minors this program supports: 1.34 is the seed's floor (resource.k8s.io/v1), 1.37 the newest EKS runs."""

KUBELET_SKEW: Final = 3
"""A kubelet may run up to three minors behind its control plane (Kubernetes version skew policy)."""


@dataclass(frozen=True)
class Release:
    """What one minor does, with the gates at their defaults unless the cluster sets them."""

    minor: Minor
    dra_api: str
    """The DRA API group/version served by default."""
    gates: Mapping[str, bool]
    """Each gate of DRA_GATES at this minor: its default, or what the stack set where the gate is not locked."""

    @property
    def name(self) -> str:
        """'1.37'."""
        return f"{self.minor[0]}.{self.minor[1]}"

    def gate(self, gate: str) -> bool:
        """Whether `gate` is on at this minor (False for a gate the table does not hold)."""
        return self.gates.get(gate, False)

    @property
    def keeps_extended_resource_name(self) -> bool:
        """KEP-5004 on: a DRA class mapping `nvidia.com/gpu` serves plain `nvidia.com/gpu` requests."""
        return self.gate(DRA_EXTENDED_RESOURCE)


def stage_at(gate: str, minor: Minor) -> GateStage | None:
    """The spec of `gate` in force at `minor`; None when the gate does not exist there (or is not in the table)."""
    found = None
    for stage in DRA_GATES.get(gate, ()):
        if stage.since <= minor:
            found = stage
    return found


def release(minor: Minor, overrides: Mapping[str, bool] | None = None) -> Release:
    """The release of `minor` (clamped to the newest this table knows), gates at their defaults plus `overrides`.

    An override of a locked gate, or of a gate that does not exist at that minor, is ignored: the component refuses
    to start with it, so what runs is the default (`refused_overrides` names them for the config's error).
    """
    known = min(minor, EKS_MINORS[-1])
    gates: dict[str, bool] = {}
    for gate in DRA_GATES:
        stage = stage_at(gate, known)
        if stage is None:
            gates[gate] = False
            continue
        wanted = (overrides or {}).get(gate)
        gates[gate] = stage.default if wanted is None or stage.locked else wanted
    return Release(known, "resource.k8s.io/v1", gates)


def refused_overrides(minor: Minor, overrides: Mapping[str, bool]) -> list[tuple[str, str]]:
    """(gate, why) for each override a component of `minor` refuses to start with."""
    refused = []
    name = f"{minor[0]}.{minor[1]}"
    for gate, wanted in sorted(overrides.items()):
        stage = stage_at(gate, min(minor, EKS_MINORS[-1]))
        if gate not in DRA_GATES:
            refused.append((gate, f"is not a DRA gate this program knows ({', '.join(sorted(DRA_GATES))})"))
        elif stage is None:
            refused.append((gate, f"does not exist in Kubernetes {name}"))
        elif stage.locked and wanted != stage.default:
            refused.append((gate, f"is {stage.stage} and locked to {str(stage.default).lower()} in {name}"))
    return refused


def effective(control_plane: Minor, kubelets: list[Minor], overrides: Mapping[str, bool] | None = None) -> Release:
    """What a cohort gets: the older of the control plane and the oldest of its kubelets decides each gate.

    A gate acted on by the kubelet as well as the control plane (KEP-5004) works on a node only where both have it.
    """
    oldest = min([control_plane, *kubelets])
    return release(oldest, overrides)
