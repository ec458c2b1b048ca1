"""The stack config's cross-field rules: every problem at once, each with its config path and fix.

Nothing is registered until this passes, so an invalid stack never half-applies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cluster.findings import Problem, show
from components import versions
from components.chart_archive import archive_problems
from components.config import ChartPin, CohortConfig, Mig, StackConfig, TimeSlicing
from policy.gpu_allocation.vocab import kube_releases, versioning
from policy.gpu_allocation.vocab.gpu_models import known_profiles
from policy.gpu_allocation.vocab.labels import COMPUTE_TYPE_LABEL, DEVICE_PLUGIN, DRA, GPU_OPERATOR, HYBRID
from policy.gpu_allocation.vocab.owners import DRA_MIN_KUBERNETES, OWNER_KINDS, allocates_through_dra
from policy.gpu_allocation.vocab.selectors import selectors_overlap


@dataclass(frozen=True)
class ClusterFacts:
    """What the cluster itself says (EKS describe-cluster), overriding declared values."""

    kubernetes_version: str | None = None
    auto_mode: bool | None = None


def parse_control_plane_version(text: str) -> tuple[int, int, int]:
    """`v1.34.2-eks-abc` -> (1, 34, 2); a missing patch reads as 0 (EKS reports `1.34`)."""
    found = versioning.parse(text, partial=True)
    if found is None:
        msg = f"not a version: {text}"
        raise ValueError(msg)
    return found.release


def selectors_disjoint(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    """Two equality selectors select disjoint node sets iff some key has different values (the pack's rule)."""
    return not selectors_overlap(a, b)


def _cohort_problems(config: StackConfig, at: CohortPath) -> Iterable[Problem]:
    names: dict[str, int] = {}
    label_key = config.cohort_label_key
    for i, cohort in enumerate(config.cohorts):
        path = at(i)
        if cohort.name in names:
            yield Problem(
                f"{path}.name",
                f"'{cohort.name}' is also the name of {at(names[cohort.name])}; "
                "cohort names must be unique: rename one",
                kind="duplicate-name",
            )
        names.setdefault(cohort.name, i)
        selector = cohort.selector(label_key)
        if selector.get(COMPUTE_TYPE_LABEL) != HYBRID:
            found = selector.get(COMPUTE_TYPE_LABEL, "<absent>")
            yield Problem(
                f"{path}.nodeSelector",
                f"{COMPUTE_TYPE_LABEL} is {found}; a selector without "
                f"{COMPUTE_TYPE_LABEL}: {HYBRID} could match EKS Auto Mode nodes, whose GPUs AWS "
                f"already manages: set {COMPUTE_TYPE_LABEL}: {HYBRID}",
            )
        if label_key not in selector:
            yield Problem(
                f"{path}.nodeSelector",
                f"has no {label_key} label; cohorts are told apart by "
                f"owner-managed labels: add {label_key}: <cohort value>",
            )
        yield from _sharing_problems(path, cohort)
        if not cohort.host_driver_verified and cohort.owner != GPU_OPERATOR:
            yield Problem(
                f"{path}.hostDriverVerified",
                f"is false; the standalone {cohort.owner} path needs a "
                "prepared host driver, and being on premises does not imply that a driver exists: run "
                "`eks-hybrid-gpu hostcheck` on every host of the cohort, then set it to true",
            )

    selectors = [cohort.selector(label_key) for cohort in config.cohorts]
    for j, i in first_overlaps(selectors):
        sel_a, sel_b = selectors[i], selectors[j]
        yield Problem(
            f"{at(j)}.nodeSelector",
            f"{sel_b} can select the same nodes as {at(i)} "
            f"({config.cohorts[i].name}: {sel_a}); one GPU must have one allocation owner: give the cohorts "
            f"different values of {label_key}",
            kind="overlap",
        )


def first_overlaps(selectors: Sequence[Mapping[str, str]]) -> list[tuple[int, int]]:
    """(j, i): for each selector j that can select a node of an earlier one, the first such i < j.

    Near-linear: selectors that differ on a key all of them carry are disjoint, so the cohorts are split by the
    values of such keys (again within each part) before any two are compared; what is left in a part shares those
    values and is compared in index order, stopping at the first overlap (identical selectors stop at once).
    """
    found: dict[int, int] = {}
    parts: list[list[int]] = [list(range(len(selectors)))]
    while parts:
        part = parts.pop()
        if len(part) < 2:
            continue
        shared = set(selectors[part[0]]).intersection(*(selectors[k].keys() for k in part[1:]))
        varying = sorted(key for key in shared if len({selectors[k][key] for k in part}) > 1)
        if varying:
            groups: dict[tuple[str, ...], list[int]] = {}
            for k in part:
                groups.setdefault(tuple(selectors[k][key] for key in varying), []).append(k)
            parts.extend(groups.values())
            continue
        seen: dict[tuple[tuple[str, str], ...], int] = {}
        distinct: list[int] = []
        for j in part:
            signature = tuple(sorted(selectors[j].items()))
            twin = seen.get(signature)
            if twin is not None:
                # An identical selector meets what its first occurrence meets, and that occurrence itself.
                found[j] = found.get(twin, twin)
                continue
            seen[signature] = j
            earlier = next((i for i in distinct if not selectors_disjoint(selectors[i], selectors[j])), None)
            if earlier is not None:
                found[j] = earlier
            distinct.append(j)
    return sorted(found.items())


def _sharing_problems(path: str, cohort: CohortConfig) -> Iterable[Problem]:
    sharing = cohort.sharing
    if isinstance(sharing, TimeSlicing) and cohort.owner != DEVICE_PLUGIN:
        yield Problem(
            f"{path}.sharing.mode",
            f"time-slicing is configured on the device plugin, but the owner is "
            f"{cohort.owner}: use owner device-plugin or sharing mode none",
        )
    if not isinstance(sharing, Mig):
        return
    if cohort.owner == DRA:
        yield Problem(
            f"{path}.sharing.mode",
            "mig sharing configures the device plugin's MIG strategy; DRA "
            "allocates existing MIG devices through the mig.nvidia.com DeviceClass: use sharing mode none",
        )
    if sharing.mig_strategy == "none":
        yield Problem(
            f"{path}.sharing.migStrategy",
            "is none, so the plugin advertises no MIG devices and a "
            "nvidia.com/mig-* request never schedules: prepare the MIG geometry, then set single or mixed",
        )
    if sharing.mig_strategy == "mixed" and sharing.mig_profile is None:
        yield Problem(
            f"{path}.sharing.migProfile",
            "is required with migStrategy mixed: name the profile the smoke Job requests, e.g. 1g.5gb",
        )
    if sharing.gpu_model is not None:
        table = known_profiles(sharing.gpu_model)
        if table is None:
            yield Problem(
                f"{path}.sharing.gpuModel",
                f"{show(sharing.gpu_model)} has no known MIG profile table: use "
                "one of A100-40GB, A100-80GB, H100-80GB, H200-141GB",
            )
        elif sharing.mig_profile is not None and sharing.mig_profile not in table:
            yield Problem(
                f"{path}.sharing.migProfile",
                f"'{sharing.mig_profile}' is not a MIG profile of {sharing.gpu_model}: use one of {', '.join(table)}",
            )


def _owner_problems(config: StackConfig, facts: ClusterFacts, at: CohortPath) -> Iterable[Problem]:
    operators = config.cohorts_of(GPU_OPERATOR)
    dra = config.cohorts_of(DRA)
    for i, _ in operators[1:]:
        yield Problem(
            f"{at(i)}.owner",
            f"is a second gpu-operator cohort ({at(operators[0][0])} is the "
            "first); the Operator is cluster-wide and cannot be pinned to a cohort: keep one",
        )
    for i, _ in dra[1:]:
        yield Problem(
            f"{at(i)}.owner",
            f"is a second dra cohort ({at(dra[0][0])} is the first); the DRA "
            "chart's names and DeviceClasses are cluster-wide, so it installs once: merge the cohorts",
        )
    if operators and config.operator.mode == "gpu-cluster":
        for i, _ in dra:
            yield Problem(
                f"{at(i)}.owner",
                "is dra next to an Operator in gpu-cluster mode; GPUCluster "
                "deploys its own DRA driver and must not get an additional standalone DRA release: "
                "remove this cohort or set operator.mode to cluster-policy",
            )
    plugins = config.cohorts_of(DEVICE_PLUGIN)
    if operators and plugins and config.operator.mode == "cluster-policy" and config.operator.device_plugin_enabled:
        names = ", ".join(f"{at(i)} ({cohort.name})" for i, cohort in plugins)
        yield Problem(
            "operator.devicePluginEnabled",
            f"is true while the standalone device plugin serves {names}; ClusterPolicy operands are not "
            "restricted by the cohort selector, so both plugins would advertise nvidia.com/gpu on the same GPUs: "
            "set operator.devicePluginEnabled to false, or move those cohorts to owner gpu-operator",
        )
    auto_mode = facts.auto_mode if facts.auto_mode is not None else config.cluster.auto_mode
    if operators and auto_mode:
        yield Problem(
            f"{at(operators[0][0])}.owner",
            "is gpu-operator on an EKS Auto Mode cluster; Operator "
            "operands are placed by GPU discovery, not by the cohort selector, and would reach Auto "
            "Mode GPUs: use the standalone device-plugin or dra owner, or an isolated cluster",
        )
    if operators and not config.operator.driver_enabled:
        for i, cohort in operators:
            if not cohort.host_driver_verified:
                yield Problem(
                    f"{at(i)}.hostDriverVerified",
                    "is false while operator.driverEnabled is false; "
                    "driver.enabled=false is only right where the host driver is verified: run "
                    "`eks-hybrid-gpu hostcheck`, then set it to true, or set operator.driverEnabled",
                )
    if any(allocates_through_dra(cohort.owner, config.operator.mode) for cohort in config.cohorts):
        yield from _dra_version_problems(config, facts)
    yield from _extended_resource_problems(config, facts)


def _dra_version_problems(config: StackConfig, facts: ClusterFacts) -> Iterable[Problem]:
    declared = facts.kubernetes_version or config.cluster.kubernetes_version
    floor = ".".join(map(str, DRA_MIN_KUBERNETES))
    if declared is None and config.cluster.source == "eks":
        return  # EKS reports its version; the check runs again once the describe-cluster facts are known
    if declared is None:
        yield Problem(
            "cluster.kubernetesVersion",
            f"is not set, and DRA needs Kubernetes {floor}+: declare the cluster's version, e.g. 1.34.4",
        )
        return
    found = parse_control_plane_version(declared)
    # EKS reports major.minor only; its 1.34 platform versions already run a 1.34.2+ patch.
    minor_only = facts.kubernetes_version is not None and declared.count(".") == 1
    if found[:2] < DRA_MIN_KUBERNETES[:2] or (not minor_only and found < DRA_MIN_KUBERNETES):
        yield Problem(
            "cluster.kubernetesVersion",
            f"is {declared}; DRA GPU allocation with resource.k8s.io/v1 "
            f"needs Kubernetes {floor}+: upgrade the cluster or use owner device-plugin",
        )


def _extended_resource_problems(config: StackConfig, facts: ClusterFacts) -> Iterable[Problem]:
    """Keeping `nvidia.com/gpu` through DRA needs KEP-5004 on at the cluster's version (or set on by the stack)."""
    if config.dra.extended_resource_name is None:
        return
    if not any(cohort.owner == DRA for cohort in config.cohorts):
        yield Problem(
            "dra.extendedResourceName",
            "is set, but no cohort has owner dra (the standalone driver's chart ships the mapping class; the GPU "
            "Operator's maps no extended resource): remove it, or add a cohort with owner dra",
        )
        return
    declared = facts.kubernetes_version or config.cluster.kubernetes_version
    if declared is None:
        return  # no version to judge by: the DRA version problem (or EKS's answer) comes first
    major, minor = parse_control_plane_version(declared)[:2]
    release = kube_releases.release((major, minor), config.cluster.feature_gates)
    if not release.keeps_extended_resource_name:
        yield Problem(
            "dra.extendedResourceName",
            f"keeps {config.dra.extended_resource_name} through DRA, but {kube_releases.DRA_EXTENDED_RESOURCE} is "
            f"off in Kubernetes {release.name} (alpha, off by default until 1.36): pods asking "
            f"{config.dra.extended_resource_name} would stay Pending on the DRA cohort. Upgrade the cluster to 1.36+, "
            f"or turn the gate on in every control-plane component and kubelet and set "
            f"cluster.featureGates.{kube_releases.DRA_EXTENDED_RESOURCE}: true, or remove dra.extendedResourceName",
        )


def _cluster_problems(config: StackConfig) -> Iterable[Problem]:
    cluster = config.cluster
    for gate, why in kube_releases.refused_overrides(cluster.release_minor, cluster.feature_gates):
        yield Problem(
            f"cluster.featureGates.{gate}",
            f"{why}: remove it (the version's default stands) or declare a kubernetesVersion where it can be set",
        )
    if cluster.source == "eks" and (not cluster.name or not cluster.region):
        yield Problem("cluster", "source eks needs both name and region: set cluster.name and cluster.region")
    for field, value in (("awsProfile", cluster.aws_profile), ("roleArn", cluster.role_arn)):
        if value is not None and cluster.source != "eks":
            yield Problem(
                f"cluster.{field}",
                f"is set with source {cluster.source}, which reaches no AWS API: remove it, or set cluster.source "
                "to eks (the kubeconfig's own users choose their credentials for source kubeconfig)",
            )
    if cluster.source == "kubeconfig" and not cluster.kubeconfig:
        yield Problem("cluster.kubeconfig", "is required with source kubeconfig: set the path of the file")
    if cluster.source != "local" and cluster.skip_await:
        yield Problem(
            "cluster.skipAwait",
            "is true on a real cluster; Pulumi would report GPU owners as ready "
            "before their pods run: remove it (it exists for the node-less local API server)",
        )


def _smoke_problems(config: StackConfig) -> Iterable[Problem]:
    approved = config.smoke_jobs.approved_cohort
    if approved is None:
        return
    names = [c.name for c in config.cohorts]
    if approved not in names:
        yield Problem(
            "smokeJobs.approvedCohort",
            f"{show(approved)} is not a cohort of this stack: use one of "
            f"{', '.join(names)}, or remove it to keep every smoke Job suspended",
        )
    if config.smoke_jobs.image == versions.SMOKE_IMAGE_PLACEHOLDER:
        yield Problem(
            "smokeJobs.image",
            "is the deliberately unusable placeholder, so no smoke Job can be "
            "approved to run: set a tested image pinned by digest",
        )


def _namespace_problems(config: StackConfig) -> Iterable[Problem]:
    roles = {kind.config_key: config.namespaces.of(owner) for owner, kind in OWNER_KINDS.items()}
    roles["workloads"] = config.namespaces.workloads
    first: dict[str, str] = {}
    for role, namespace in roles.items():
        if namespace in first:
            yield Problem(
                f"namespaces.{role}",
                f"'{namespace}' is also namespaces.{first[namespace]}; each role needs its own namespace (the "
                "owners' namespaces are privileged, the workloads' restricted): choose a different name",
            )
        first.setdefault(namespace, role)


def _chart_problems(config: StackConfig, project_dir: Path) -> Iterable[Problem]:
    pins: list[tuple[str, ChartPin, bool, str]] = [
        (kind.config_key, config.charts.of(owner), bool(config.cohorts_of(owner)), kind.chart.name)
        for owner, kind in OWNER_KINDS.items()
    ]
    for key, pin, used, chart_name in pins:
        source = pin.source
        if source is None or not used:
            continue
        path = f"charts.{key}.source"
        chosen = [name for name in ("repo", "oci", "archive") if getattr(source, name)]
        if len(chosen) != 1:
            yield Problem(path, f"sets {chosen or 'none'} of repo, oci and archive; choose exactly one")
            continue
        if source.archive is not None:
            yield from archive_problems(f"{path}.archive", project_dir, source.archive, pin.version, chart_name)


class CohortPath:
    """Names a cohort by its place in the stack file, also when the model holds only the cohorts that parsed."""

    def __init__(self, positions: Sequence[int] | None = None) -> None:
        """``positions[i]``: where the model's i-th cohort sits in the file (None: the same place)."""
        self.positions = positions

    def __call__(self, index: int) -> str:
        """``cohorts[<index in the file>]``."""
        return f"cohorts[{self.positions[index] if self.positions is not None else index}]"


def validate(
    config: StackConfig, project_dir: Path, facts: ClusterFacts | None = None, positions: Sequence[int] | None = None
) -> list[Problem]:
    """Every cross-field problem of a config that passed the field-level model.

    ``positions``: where each cohort of ``config`` sits in the stack file, when cohorts that failed the model were
    left out (their problems are reported by the model).
    """
    facts = facts or ClusterFacts()
    at = CohortPath(positions)
    return [
        *_cluster_problems(config),
        *_cohort_problems(config, at),
        *_owner_problems(config, facts, at),
        *_smoke_problems(config),
        *_namespace_problems(config),
        *_chart_problems(config, project_dir),
    ]
