"""Loading and validating the stack config: every problem at once, each with its config path and fix.

Nothing is registered until this passes, so an invalid stack never half-applies.
"""

from __future__ import annotations

import re
import tarfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from components import versions
from components.config import ChartPin, CohortConfig, Mig, StackConfig, TimeSlicing
from policy.gpu_allocation.vocab.gpu_models import known_profiles
from policy.gpu_allocation.vocab.labels import COMPUTE_TYPE_LABEL, HYBRID, PROJECT
from policy.gpu_allocation.vocab.selectors import selectors_overlap


@dataclass(frozen=True)
class Problem:
    """One invalid setting: where it is and what to do about it."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{PROJECT}:{self.path}: {self.message}"


class StackConfigError(Exception):
    """The stack config is invalid; `problems` lists every problem found."""

    def __init__(self, problems: list[Problem], stack_file: str | None = None, subject: str | None = None) -> None:
        self.problems = problems
        where = f" in {stack_file}" if stack_file else ""
        if subject is None:
            head = f"The stack config{where} has {len(problems)} problem(s); nothing was changed:"
        else:
            head = f"{subject} do not fit the stack config{where}: {len(problems)} problem(s); nothing was changed:"
        lines = [head]
        lines += [f"  - {p}" for p in problems]
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class ClusterFacts:
    """What the cluster itself says (EKS describe-cluster), overriding declared values."""

    kubernetes_version: str | None = None
    auto_mode: bool | None = None


def _format_loc(loc: Iterable[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("none", "time-slicing", "mig", "function-after[_name_is_dns_label(), str]"):
            continue  # discriminator tags of the sharing union
        else:
            out += f".{part}" if out else part
    return out


def _pydantic_problems(error: ValidationError) -> list[Problem]:
    problems = []
    for item in error.errors(include_url=False):
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "is not a setting of this program; remove it or check its spelling"
        elif item["type"] == "missing":
            message = "is required; add it to the stack file"
        elif item["type"] == "union_tag_invalid":
            message = "sharing.mode must be one of none, time-slicing or mig"
        problems.append(Problem(_format_loc(item["loc"]), message))
    return problems


def parse_version(text: str) -> tuple[int, int, int]:
    """`v1.34.2-eks-abc` -> (1, 34, 2); a missing patch reads as 0."""
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not match:
        msg = f"not a version: {text}"
        raise ValueError(msg)
    return int(match[1]), int(match[2]), int(match[3] or 0)


def selectors_disjoint(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    """Two equality selectors select disjoint node sets iff some key has different values (the pack's rule)."""
    return not selectors_overlap(a, b)


def _cohort_problems(config: StackConfig) -> Iterable[Problem]:
    names: dict[str, int] = {}
    label_key = config.cohort_label_key
    for i, cohort in enumerate(config.cohorts):
        path = f"cohorts[{i}]"
        if cohort.name in names:
            yield Problem(
                f"{path}.name",
                f"'{cohort.name}' is also the name of cohorts[{names[cohort.name]}]; "
                "cohort names must be unique: rename one",
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
        if not cohort.host_driver_verified and cohort.owner != "gpu-operator":
            yield Problem(
                f"{path}.hostDriverVerified",
                f"is false; the standalone {cohort.owner} path needs a "
                "prepared host driver, and being on premises does not imply that a driver exists: run "
                "`eks-hybrid-gpu hostcheck` on every host of the cohort, then set it to true",
            )

    # Each selector is built once, not once per pair: the pairwise check is quadratic in the cohorts.
    selectors = [cohort.selector(label_key) for cohort in config.cohorts]
    for i, j in combinations(range(len(selectors)), 2):
        sel_a, sel_b = selectors[i], selectors[j]
        if not selectors_disjoint(sel_a, sel_b):
            yield Problem(
                f"cohorts[{j}].nodeSelector",
                f"{sel_b} can select the same nodes as cohorts[{i}] "
                f"({config.cohorts[i].name}: {sel_a}); one GPU must have one allocation owner: give the cohorts "
                f"different values of {label_key}",
            )


def _sharing_problems(path: str, cohort: CohortConfig) -> Iterable[Problem]:
    sharing = cohort.sharing
    if isinstance(sharing, TimeSlicing) and cohort.owner != "device-plugin":
        yield Problem(
            f"{path}.sharing.mode",
            f"time-slicing is configured on the device plugin, but the owner is "
            f"{cohort.owner}: use owner device-plugin or sharing mode none",
        )
    if not isinstance(sharing, Mig):
        return
    if cohort.owner == "dra":
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
                f"'{sharing.gpu_model}' has no known MIG profile table: use "
                "one of A100-40GB, A100-80GB, H100-80GB, H200-141GB",
            )
        elif sharing.mig_profile is not None and sharing.mig_profile not in table:
            yield Problem(
                f"{path}.sharing.migProfile",
                f"'{sharing.mig_profile}' is not a MIG profile of {sharing.gpu_model}: use one of {', '.join(table)}",
            )


def _owner_problems(config: StackConfig, facts: ClusterFacts) -> Iterable[Problem]:
    operators = config.cohorts_of("gpu-operator")
    dra = config.cohorts_of("dra")
    for i, _ in operators[1:]:
        yield Problem(
            f"cohorts[{i}].owner",
            f"is a second gpu-operator cohort (cohorts[{operators[0][0]}] is the "
            "first); the Operator is cluster-wide and cannot be pinned to a cohort: keep one",
        )
    for i, _ in dra[1:]:
        yield Problem(
            f"cohorts[{i}].owner",
            f"is a second dra cohort (cohorts[{dra[0][0]}] is the first); the DRA "
            "chart's names and DeviceClasses are cluster-wide, so it installs once: merge the cohorts",
        )
    if operators and config.operator.mode == "gpu-cluster":
        for i, _ in dra:
            yield Problem(
                f"cohorts[{i}].owner",
                "is dra next to an Operator in gpu-cluster mode; GPUCluster "
                "deploys its own DRA driver and must not get an additional standalone DRA release: "
                "remove this cohort or set operator.mode to cluster-policy",
            )
    auto_mode = facts.auto_mode if facts.auto_mode is not None else config.cluster.auto_mode
    if operators and auto_mode:
        yield Problem(
            f"cohorts[{operators[0][0]}].owner",
            "is gpu-operator on an EKS Auto Mode cluster; Operator "
            "operands are placed by GPU discovery, not by the cohort selector, and would reach Auto "
            "Mode GPUs: use the standalone device-plugin or dra owner, or an isolated cluster",
        )
    if operators and not config.operator.driver_enabled:
        for i, cohort in operators:
            if not cohort.host_driver_verified:
                yield Problem(
                    f"cohorts[{i}].hostDriverVerified",
                    "is false while operator.driverEnabled is false; "
                    "driver.enabled=false is only right where the host driver is verified: run "
                    "`eks-hybrid-gpu hostcheck`, then set it to true, or set operator.driverEnabled",
                )
    uses_dra = bool(dra) or (bool(operators) and config.operator.mode == "gpu-cluster")
    if uses_dra:
        yield from _dra_version_problems(config, facts)


def _dra_version_problems(config: StackConfig, facts: ClusterFacts) -> Iterable[Problem]:
    declared = facts.kubernetes_version or config.cluster.kubernetes_version
    floor = ".".join(map(str, versions.DRA_MIN_KUBERNETES))
    if declared is None and config.cluster.source == "eks":
        return  # EKS reports its version; the check runs again once the describe-cluster facts are known
    if declared is None:
        yield Problem(
            "cluster.kubernetesVersion",
            f"is not set, and DRA needs Kubernetes {floor}+: declare the cluster's version, e.g. 1.34.4",
        )
        return
    found = parse_version(declared)
    # EKS reports major.minor only; its 1.34 platform versions already run a 1.34.2+ patch.
    minor_only = facts.kubernetes_version is not None and declared.count(".") == 1
    if found[:2] < versions.DRA_MIN_KUBERNETES[:2] or (not minor_only and found < versions.DRA_MIN_KUBERNETES):
        yield Problem(
            "cluster.kubernetesVersion",
            f"is {declared}; DRA GPU allocation with resource.k8s.io/v1 "
            f"needs Kubernetes {floor}+: upgrade the cluster or use owner device-plugin",
        )


def _cluster_problems(config: StackConfig) -> Iterable[Problem]:
    cluster = config.cluster
    if cluster.source == "eks" and (not cluster.name or not cluster.region):
        yield Problem("cluster", "source eks needs both name and region: set cluster.name and cluster.region")
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
            f"'{approved}' is not a cohort of this stack: use one of "
            f"{', '.join(names)}, or remove it to keep every smoke Job suspended",
        )
    if config.smoke_jobs.image == versions.SMOKE_IMAGE_PLACEHOLDER:
        yield Problem(
            "smokeJobs.image",
            "is the deliberately unusable placeholder, so no smoke Job can be "
            "approved to run: set a tested image pinned by digest",
        )


def _chart_problems(config: StackConfig, project_dir: Path) -> Iterable[Problem]:
    pins: list[tuple[str, ChartPin, bool]] = [
        ("devicePlugin", config.charts.device_plugin, bool(config.cohorts_of("device-plugin"))),
        ("draDriver", config.charts.dra_driver, bool(config.cohorts_of("dra"))),
        ("gpuOperator", config.charts.gpu_operator, bool(config.cohorts_of("gpu-operator"))),
    ]
    for key, pin, used in pins:
        source = pin.source
        if source is None or not used:
            continue
        path = f"charts.{key}.source"
        chosen = [name for name in ("repo", "oci", "archive") if getattr(source, name)]
        if len(chosen) != 1:
            yield Problem(path, f"sets {chosen or 'none'} of repo, oci and archive; choose exactly one")
            continue
        if source.oci is not None and not source.oci.startswith("oci://"):
            yield Problem(f"{path}.oci", f"'{source.oci}' is not an OCI reference: write oci://host/path/chart")
        if source.archive is not None:
            yield from _archive_problems(f"{path}.archive", project_dir / source.archive, pin.version)


def _archive_problems(path: str, archive: Path, version: str) -> Iterable[Problem]:
    archive = archive.resolve()
    if not archive.is_file():
        yield Problem(path, f"{archive} does not exist: point it at the chart's .tgz")
        return
    try:
        with tarfile.open(archive) as tar:
            member = next(m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/Chart.yaml"))
            handle = tar.extractfile(member)
            chart: dict[str, Any] = yaml.safe_load(handle.read()) if handle else {}
    except (tarfile.TarError, StopIteration, yaml.YAMLError):
        yield Problem(path, f"{archive} is not a Helm chart archive: use the .tgz that `helm package` writes")
        return
    if str(chart.get("version")) != version:
        yield Problem(
            path,
            f"{archive} holds version {chart.get('version')}, but the pinned version is {version}: "
            "pin the archive's version or use the archive of the pinned version",
        )


def validate(config: StackConfig, project_dir: Path, facts: ClusterFacts | None = None) -> list[Problem]:
    """Every cross-field problem of a config that passed the field-level model."""
    facts = facts or ClusterFacts()
    return [
        *_cluster_problems(config),
        *_cohort_problems(config),
        *_owner_problems(config, facts),
        *_smoke_problems(config),
        *_chart_problems(config, project_dir),
    ]


def load_stack_config(
    raw: Mapping[str, Any],
    project_dir: Path,
    facts: ClusterFacts | None = None,
    stack_file: str | None = None,
) -> StackConfig:
    """Parse and validate raw config values (keys without the project namespace) or raise StackConfigError."""
    try:
        config = StackConfig.model_validate(dict(raw))
    except ValidationError as error:
        raise StackConfigError(_pydantic_problems(error), stack_file) from None
    problems = validate(config, project_dir, facts)
    if problems:
        raise StackConfigError(problems, stack_file)
    return config
