"""Cluster-scoped installs with one owner: the compute-domain CRDs and Node Feature Discovery.

Seed: "Do not deploy a second discovery controller"; the CRD and NFD conflicts are listed in charts.md §5. CRDs are
cluster-scoped and NFD labels every node, so disjoint cohorts do not keep two installs apart.
"""

from __future__ import annotations

from typing import Final

from pulumi_policy import (
    ReportViolation,
    Severity,
    StackValidationArgs,
)

from ...vocab.labels import DEVICE_PLUGIN, DRA, GPU_OPERATOR, PROJECT
from ...vocab.owners import DRA_KIND
from ..charts import NFD_NAME
from ..declare import stack_policy
from ..props import UNKNOWN
from ..stack_view import StackView
from .scope import CRD_KIND, WORKLOAD_KINDS, judge_gpu_stack

COMPUTE_DOMAIN_CRDS: Final = (
    "computedomains.resource.nvidia.com",
    "computedomaincliques.resource.nvidia.com",
)
"""CRDs shipped by both the DRA chart and the GPU Operator chart (charts.md §5)."""


def _check_crd_owners(view: StackView, report: ReportViolation) -> None:
    installs = view.installations()
    for crd in COMPUTE_DOMAIN_CRDS:
        providers: dict[str, str] = {}
        for install in installs:
            # A Chart whose inputs are hidden counts through the CRD objects it renders (below).
            if install.owner not in {DRA, GPU_OPERATOR} or not install.inputs_visible:
                continue
            skip = install.skips_crds
            if skip is UNKNOWN or skip is True:
                continue
            providers[install.resource.urn] = install.resource.describe
        for resource in view.resources:
            if resource.kind != CRD_KIND or resource.metadata.get("name") != crd:
                continue
            owner = view.installation_of(resource)
            if owner is None:
                providers[resource.urn] = resource.describe
            elif not owner.inputs_visible:
                providers[owner.resource.urn] = owner.resource.describe
        if len(providers) < 2:
            continue
        schemas = ", and the two charts ship different schemas" if crd.startswith("computedomains.") else ""
        message = (
            f"CRD {crd} has {len(providers)} owners: "
            f"{', '.join(sorted(providers.values()))}. CRDs are cluster-scoped, so the "
            f"installs overwrite each other even on disjoint nodes{schemas}. Keep one "
            "owner: set skipCrds: true on the "
            "standalone DRA Chart when the GPU Operator owns the CRDs, or choose one "
            f"owner in {PROJECT}:cohorts[i].owner."
        )
        report(message, sorted(providers)[0])


def compute_domain_crds_one_owner_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse two installs of the compute-domain CRDs."""
    judge_gpu_stack(args, report_violation, _check_crd_owners, WORKLOAD_KINDS | {CRD_KIND})


COMPUTE_DOMAIN_CRDS_ONE_OWNER = stack_policy(
    "compute-domain-crds-one-owner",
    "The cluster-scoped compute-domain CRDs are installed by one chart only.",
    compute_domain_crds_one_owner_validator,
    severity=Severity.HIGH,
    remediation=(
        "Keep one owner of the compute-domain CRDs: set skipCrds: true on the standalone DRA Chart when the GPU "
        f"Operator owns them, or choose one owner in {PROJECT}:cohorts[i].owner."
    ),
    url=DRA_KIND.docs_url,
    tags=["ownership", "dra"],
)


def _nfd_providers(view: StackView) -> dict[str, str]:
    providers: dict[str, str] = {}
    for install in view.installations():
        if install.owner not in {DEVICE_PLUGIN, GPU_OPERATOR}:
            continue
        nfd = install.nfd()
        if nfd.value is True:
            providers[install.resource.urn] = nfd.subject
    for resource in view.resources:
        chart = resource.props.get("chart") if resource.is_helm else None
        if isinstance(chart, str) and NFD_NAME in chart:
            providers[resource.urn] = resource.describe
        elif resource.is_nfd and resource.kind in {"DaemonSet", "Deployment"}:
            # NFD rendered by a Chart that is no GPU owner (a standalone NFD chart), or applied on its own.
            if view.installation_urn(resource) is not None:
                continue
            chart_resource = view.helm_ancestor(resource)
            if chart_resource is not None:
                providers.setdefault(chart_resource.urn, f"{chart_resource.describe} (renders {resource.describe})")
            else:
                providers[resource.urn] = resource.describe
    return providers


def _check_nfd(view: StackView, report: ReportViolation) -> None:
    providers = _nfd_providers(view)
    if len(providers) < 2:
        return
    message = (
        f"Node Feature Discovery has {len(providers)} owners: "
        f"{', '.join(sorted(providers.values()))}. Two NFD installs fight over the "
        "same node labels and CRDs; the guide says not to deploy a second discovery "
        "controller. Set nfd.enabled=false explicitly on every chart that does not own "
        "NFD (in the device plugin, gfd.enabled=true alone turns NFD on)."
    )
    report(message, sorted(providers)[0])


def nfd_one_owner_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse two Node Feature Discovery installs."""
    judge_gpu_stack(args, report_violation, _check_nfd)


NFD_ONE_OWNER = stack_policy(
    "nfd-one-owner",
    "Node Feature Discovery is installed once, so two discovery controllers never fight over labels.",
    nfd_one_owner_validator,
    severity=Severity.HIGH,
    remediation=(
        "Set nfd.enabled=false explicitly on every chart that does not own NFD (in the device plugin, "
        f"gfd.enabled=true alone turns NFD on); the program's charts follow {PROJECT}:cohorts[i].owner."
    ),
    url="https://kubernetes-sigs.github.io/node-feature-discovery/",
    tags=["ownership", "nfd"],
)
