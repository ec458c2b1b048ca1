"""dra-extended-resource-request-served: a plain GPU request that can only land on DRA nodes is served by a mapping.

KEP-5004 keeps ``nvidia.com/gpu`` workloads running unchanged on a DRA cohort, but only where a DeviceClass maps the
name and the gate ``DRAExtendedResource`` is on (alpha and off in 1.34/1.35, on from 1.36, GA in 1.37:
:mod:`...vocab.kube_releases`). Observed here on real API servers and schedulers: on 1.37.2 a pod asking
``nvidia.com/gpu: 1`` on a node with no device plugin was placed through the DRA chart's ``gpu.nvidia.com`` class (a
ResourceClaim ``<pod>-extended-resources-…``, ``status.extendedResourceClaimStatus``); on 1.34.4 the API server
dropped the class's ``extendedResourceName`` and the pod stayed Pending "Insufficient nvidia.com/gpu". A request the
workload can still take to a device plugin's node is served there, and is not this policy's.
"""

from __future__ import annotations

from pulumi_policy import (
    ReportViolation,
    Severity,
    StackValidationArgs,
)

from ...vocab import kube_releases
from ...vocab.labels import DRA, PROJECT
from ..cluster_version import VERSION_CONFIG, ClusterVersion, cluster_version, how_to_tell
from ..declare import stack_policy
from ..findings import CANNOT_JUDGE, PREVIEW_AGAIN, report_findings
from ..name_mapping import (
    MAPPING_KINDS,
    MappingClass,
    PlainRequest,
    Publisher,
    describe_all,
    mapping_classes,
    plain_requests,
    publishers,
    publishes_name,
    reads_mapping,
)
from ..stack_view import StackView

NAME = "dra-extended-resource-request-served"
GATE = kube_releases.DRA_EXTENDED_RESOURCE
CLAIM_FIX = (
    "ask through a ResourceClaim instead (pod resourceClaims with a ResourceClaimTemplate of the gpu.nvidia.com "
    "class, and resources.claims in the container)"
)


def _lands(request: PlainRequest, drivers: list[Publisher]) -> str:
    where = "; ".join(sorted(d.where for d in drivers if d.reaches(request.placement)))
    return (
        f"{request.describe} asks {request.name} with no ResourceClaim and can only land on nodes of the DRA driver "
        f"({where}), where no device plugin of this stack publishes {request.name}"
    )


def _no_mapping(request: PlainRequest, drivers: list[Publisher]) -> str:
    reaching = [d for d in drivers if d.reaches(request.placement)]
    if all(d.operator for d in reaching):
        # The GPUCluster runs the driver and no device plugin; its GPU class has no extendedResourceName to set.
        keep = (
            "add a DeviceClass of your own that maps the name (spec.extendedResourceName: "
            f"{request.name}, selecting the driver's devices with device.driver == 'gpu.nvidia.com'; KEP-5004, on "
            f"Kubernetes 1.36+ or with {GATE} on: the Operator's own GPU class maps none), or "
        )
        why = "the GPU Operator runs no device plugin under a GPUCluster, and no DeviceClass maps the name"
    else:
        keep = (
            f"map the name (this program: {PROJECT}:dra.extendedResourceName: nvidia.com/gpu keeps the DRA chart's "
            f"gpu.nvidia.com mapping, on Kubernetes 1.36+ or with {GATE} on), or "
            if request.name == "nvidia.com/gpu"
            else ""
        )
        why = "no DeviceClass maps it"
    return (
        f"{_lands(request, drivers)} and {why} (spec.extendedResourceName): the scheduler finds no "
        f"{request.name} there and the pod stays Pending (Insufficient {request.name}). Either {keep}{CLAIM_FIX}, "
        f"or place it on a device-plugin cohort ({request.resource.manifest_path}); {PREVIEW_AGAIN}."
    )


def _gate_off(
    request: PlainRequest, drivers: list[Publisher], classes: list[MappingClass], version: ClusterVersion
) -> str:
    return (
        f"{_lands(request, drivers)}; {describe_all(classes)} maps it, but {version.gate_words()}: the API server "
        f"drops spec.extendedResourceName from the class, so the mapping serves nothing and the pod stays Pending "
        f"(Insufficient {request.name}; observed on 1.34.4). Upgrade the cluster to 1.36+ ({GATE} beta, on by default; "
        f"GA in 1.37), or turn {GATE} on in the API server, controller-manager, scheduler and every GPU node's kubelet "
        f"and declare it ({PROJECT}:cluster.featureGates.{GATE}: true, or featureGates in the config of {NAME}), or "
        f"{CLAIM_FIX}; {PREVIEW_AGAIN}."
    )


def _unknown(
    request: PlainRequest, drivers: list[Publisher], classes: list[MappingClass], version: ClusterVersion
) -> str:
    return (
        f"{_lands(request, drivers)}; {describe_all(classes)} maps it, and whether that serves the pod depends on the "
        f"Kubernetes version ({GATE}: off in 1.34 and 1.35, on from 1.36), but {version.problem}, {CANNOT_JUDGE}. "
        f"{how_to_tell(NAME)}."
    )


def request_served_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse a plain request that can only land on DRA nodes where no mapping serves it at the stack's version."""
    view = StackView.from_args(args, MAPPING_KINDS)
    by_name: dict[str, list[MappingClass]] = {}
    for mapping in mapping_classes(view):
        by_name.setdefault(mapping.name, []).append(mapping)
    found = publishers(view)
    drivers = [p for p in found if p.owner == DRA]
    requests = plain_requests(view, frozenset(by_name))
    if not requests or not drivers:
        unreadable = view.problems(reads_mapping)
        if unreadable:
            report_findings(unreadable, report_violation)
            return
        args.not_applicable("the stack runs no DRA driver" if requests else "no plain GPU request in the stack")
        return
    version: ClusterVersion | None = None
    for request in requests:
        if not any(d.reaches(request.placement) for d in drivers):
            continue  # never on a DRA driver's node
        if any(publishes_name(p, request.name) and p.reaches(request.placement) for p in found):
            continue  # a device plugin's node may serve it
        classes = by_name.get(request.name, [])
        if not classes:
            report_violation(_no_mapping(request, drivers), request.resource.urn)
            continue
        version = version or cluster_version(args.get_config(), NAME)
        if version.problem is not None:
            report_violation(_unknown(request, drivers, classes, version), request.resource.urn)
        elif not version.mapping_on:
            report_violation(_gate_off(request, drivers, classes, version), request.resource.urn)
    report_findings(view.problems(reads_mapping), report_violation)


DRA_EXTENDED_RESOURCE_REQUEST_SERVED = stack_policy(
    name=NAME,
    description=(
        "A plain nvidia.com/gpu request (no ResourceClaim) that can only land on a DRA driver's nodes is served by "
        f"a DeviceClass mapping the name, with {GATE} on at the cluster's Kubernetes version."
    ),
    validate=request_served_validator,
    severity=Severity.HIGH,
    config=VERSION_CONFIG,
    remediation=(
        f"Keep the name through DRA ({PROJECT}:dra.extendedResourceName: nvidia.com/gpu) on Kubernetes 1.36+ or with "
        f"{PROJECT}:cluster.featureGates.{GATE}: true; or ask through a ResourceClaim; or place the workload on a "
        f"device-plugin cohort. Declare the version in {PROJECT}:cluster.kubernetesVersion or this policy's "
        "kubernetesVersion."
    ),
    url="https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/",
    tags=["dra", "workloads", "gpu"],
)
