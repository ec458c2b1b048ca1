"""Kubernetes shapes as the rules see them: one resource, its pod template, containers and placement.

:class:`Resource` wraps one object of a stack (type, names, plain props, parent) and answers what it *is* from the
object alone (:mod:`..vocab.allocators`): the allocator or companion a workload runs, a GPU Operator CR, a smoke
Job. The program's stamps (``eks-hybrid-gpu.io/*``, see ``vocab.labels``) refine that answer with a config path;
they never decide it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final

from pulumi_policy import PolicyResource, ReportViolation, ResourceValidationArgs
from pulumi_policy.policy import _NotApplicableError

from ..vocab import allocators
from ..vocab import labels as ownership
from ..vocab.selectors import Placement
from .parsing import load_json
from .props import UNKNOWN, as_dict, as_list, contains_unknown, dig, readable, string_map
from .readers import Finding, cannot_judge, effective_env, report_findings

PROJECT: Final = ownership.PROJECT
LABELS_NOTE: Final = (
    "Labels are scheduling inputs, not a security boundary: also verify that no "
    "other plugin or Operator publishes the same physical GPUs."
)
"""Appended to every ownership and targeting message (the guide: "Choose one allocation owner per GPU")."""

CHART_TYPES: Final = frozenset({"kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Chart"})
RELEASE_TYPE: Final = "kubernetes:helm.sh/v3:Release"
HELM_TYPES: Final = CHART_TYPES | {RELEASE_TYPE}

DEVICE_PLUGIN: Final[str] = ownership.OWNERS[0]
DRA: Final[str] = ownership.OWNERS[1]
GPU_OPERATOR: Final[str] = ownership.OWNERS[2]
"""The owners, from the vocabulary (``device-plugin``, ``dra``, ``gpu-operator``)."""

POD_SPEC_PATHS: Final[Mapping[str, tuple[str, ...]]] = {
    "Pod": ("spec",),
    "PodTemplate": ("template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
"""Where each workload kind keeps its pod spec."""

GPU_DISCOVERY_LABELS: Final = (
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
    "feature.node.kubernetes.io/cpu-model.vendor_id",
    "nvidia.com/gpu.present",
)
"""Labels of the charts' default GPU-discovery affinity (charts.md 2.1 and 3.1)."""

CONFIG_MAP_TYPE: Final = "kubernetes:core/v1:ConfigMap"

CHART_INPUTS_HIDDEN: Final = (
    "Chart v4 inputs are not sent to policy analyzers (a remote component arrives with empty props)"
)
"""Start of the not-applicable reason for a Chart whose props are empty."""


def chart_inputs_hidden(checked: str) -> str:
    """The not-applicable reason for a Chart with empty props: what is checked on its rendered objects instead."""
    return f"{CHART_INPUTS_HIDDEN}; {checked}"


NFD_NAME: Final = "node-feature-discovery"
APP_NAME_LABEL: Final = "app.kubernetes.io/name"
HELM_CHART_LABEL: Final = "helm.sh/chart"
SMOKE_NAME: Final = re.compile(r"(^|[-_.])(smoke|validation|validate)([-_.]|$)", re.ASCII)
"""A Job name that says it is a smoke or validation Job (the guide's ``hybrid-gpu-<cohort>-smoke``)."""

# --------------------------------------------------------------------------- resources


@dataclass
class Resource:
    """One resource as a rule sees it: its type, names and plain props."""

    resource_type: str
    name: str
    urn: str
    props: dict[str, Any]
    parent_urn: str | None = None
    problems: dict[str, Finding] = field(default_factory=dict, compare=False, repr=False)
    """Fields this object carries that a check could not read, by field: reported, never ignored (fail closed)."""

    @classmethod
    def from_args(cls, args: ResourceValidationArgs) -> Resource:
        """Build from the arguments of a resource policy (once per args: the policies of one object share it)."""
        cached = getattr(args, "_gpu_resource", None)
        if isinstance(cached, Resource):
            return cached
        props, error = readable(args.props)
        built = cls(
            resource_type=args.resource_type,
            name=args.name,
            urn=args.urn,
            props=props,
            parent_urn=getattr(args.opts, "parent", None) or None,
        )
        if error is not None:
            built.cannot_read("its inputs", error)
        args._gpu_resource = built  # type: ignore[attr-defined]
        return built

    @classmethod
    def from_stack(cls, resource: PolicyResource, *, read: bool = True) -> Resource:
        """Build from one resource of a stack policy; ``read=False`` keeps its place in the tree, not its props."""
        parent = resource.parent.urn if resource.parent is not None else None
        if parent is None:
            parent = getattr(resource.opts, "parent", None) or None
        props, error = readable(resource.props) if read else ({}, None)
        built = cls(
            resource_type=resource.resource_type,
            name=resource.name,
            urn=resource.urn,
            props=props,
            parent_urn=parent,
        )
        if error is not None:
            built.cannot_read("its inputs", error)
        return built

    def cannot_read(self, field_name: str, why: str, fix: str | None = None) -> None:
        """Record a field that a check cannot read (once per field)."""
        if field_name not in self.problems:
            finding = cannot_judge(self.describe, field_name, why, self.urn)
            self.problems[field_name] = finding if fix is None else Finding(**{**finding.__dict__, "fix": fix})

    @property
    def kind(self) -> str:
        """The type token's last part: DaemonSet, Chart, Release..."""
        return self.resource_type.rsplit(":", 1)[-1]

    @property
    def api_group_version(self) -> str:
        """The type token's middle part, e.g. ``apps/v1`` or ``resource.k8s.io/v1``."""
        parts = self.resource_type.split(":")
        return parts[1] if len(parts) == 3 else ""

    @property
    def is_kubernetes(self) -> bool:
        """Tell whether this is a Kubernetes provider resource."""
        return self.resource_type.startswith("kubernetes:")

    @property
    def metadata(self) -> dict[str, Any]:
        """The manifest's metadata, or an empty dict."""
        return as_dict(self.props.get("metadata"))

    @property
    def labels(self) -> Any:
        """The metadata labels (a dict, or UNKNOWN)."""
        value = self.metadata.get("labels")
        return value if value is UNKNOWN else as_dict(value)

    @property
    def annotations(self) -> Any:
        """The metadata annotations (a dict, or UNKNOWN)."""
        value = self.metadata.get("annotations")
        return value if value is UNKNOWN else as_dict(value)

    def label(self, key: str) -> Any:
        """One label value: a string, None, or UNKNOWN."""
        labels = self.labels
        return UNKNOWN if labels is UNKNOWN else labels.get(key)

    def annotation(self, key: str) -> Any:
        """One annotation value: a string, None, or UNKNOWN."""
        annotations = self.annotations
        return UNKNOWN if annotations is UNKNOWN else annotations.get(key)

    @property
    def k8s_name(self) -> str | None:
        """The manifest's ``namespace/name`` or ``name``, if known."""
        name = self.metadata.get("name")
        if not isinstance(name, str) or not name:
            return None
        namespace = self.metadata.get("namespace")
        if isinstance(namespace, str) and namespace:
            return f"{namespace}/{name}"
        return name

    @property
    def describe(self) -> str:
        """Name the object for a message: type token and name."""
        return f"{self.resource_type} '{self.k8s_name or self.name}'"

    @property
    def parent_type(self) -> str | None:
        """The parent's type token, read from this resource's URN (``…$parentType$ownType::name``)."""
        parts = self.urn.split("::")
        if len(parts) < 4:
            return None
        chain = parts[2].split("$")
        return chain[-2] if len(chain) > 1 else None

    @property
    def parent_name(self) -> str | None:
        """The parent's Pulumi name, read from the parent URN."""
        if not self.parent_urn:
            return None
        return self.parent_urn.rsplit("::", 1)[-1] or None

    @property
    def rendered_by_chart(self) -> bool:
        """Tell whether a Helm Chart component (v4 or v3) rendered this object."""
        return self.parent_type in CHART_TYPES

    @property
    def owner(self) -> str | None:
        """The ``eks-hybrid-gpu.io/owner`` label, if known: this program's stamp, absent on any other stack."""
        value = self.label(ownership.OWNER_LABEL)
        return value if isinstance(value, str) else None

    @cached_property
    def identity(self) -> tuple[str, str] | None:
        """(owner, role) recognised from the object alone, whoever installed it (:mod:`vocab.allocators`).

        A workload is judged by what its pod template runs; a ``ClusterPolicy``/``GPUCluster`` is the GPU
        Operator. Stamps, parents and the ledger play no part.
        """
        if cr_mode(self) is not None:
            return GPU_OPERATOR, "operator"
        pod = self.pod_spec
        if not isinstance(pod, dict):
            return None
        path = POD_SPEC_PATHS[self.kind][:-1]
        template_labels = as_dict(dig(self.props, *path, "metadata", "labels")) if path else self.labels
        return allocators.pod_owner(pod, template_labels if isinstance(template_labels, dict) else {})

    @property
    def allocation_owner(self) -> str | None:
        """The owner this object belongs to: the program's stamp where there is one, else its intrinsic identity."""
        return self.owner or (self.identity[0] if self.identity is not None else None)

    @property
    def is_allocator(self) -> bool:
        """Tell whether this workload publishes GPUs to the kubelet (device plugin or DRA kubelet plugin)."""
        return self.kind == "DaemonSet" and self.identity is not None and self.identity[1] == "allocator"

    @cached_property
    def stamped(self) -> bool:
        """Tell whether this program stamped the object (an ``eks-hybrid-gpu.io/*`` label or annotation)."""
        prefix = f"{ownership.LABEL_PREFIX}/"
        for table in (self.labels, self.annotations):
            if isinstance(table, dict) and any(key.startswith(prefix) for key in table):
                return True
        return False

    @property
    def cohort(self) -> str | None:
        """The ``eks-hybrid-gpu.io/cohort`` label, if known."""
        value = self.label(ownership.COHORT_LABEL)
        return value if isinstance(value, str) else None

    def config_path(self, suffix: str, default: str) -> str:
        """Return the stamped stack-config path plus ``suffix``, else ``default``."""
        stamped = self.annotation(ownership.CONFIG_PATH_ANNOTATION)
        if isinstance(stamped, str) and stamped:
            return f"{stamped}{suffix}"
        return default

    @property
    def stamped_selector(self) -> dict[str, str] | None:
        """The cohort selector from the ``node-selector`` annotation, if readable."""
        raw = self.annotation(ownership.SELECTOR_ANNOTATION)
        if raw is None or raw is UNKNOWN:
            return None
        where = f"annotation {ownership.SELECTOR_ANNOTATION}"
        if not isinstance(raw, str):
            self.cannot_read(where, "is not a string")
            return None
        value, error = load_json(raw)
        selector = None if error is not None else string_map(value)
        if selector is None:
            self.cannot_read(where, error or "is not a JSON object of strings")
        return selector

    @property
    def is_smoke_job(self) -> bool:
        """Tell whether this is a GPU smoke Job: the program's label, or a GPU Job named as a smoke/validation Job.

        A team pasting the guide's ``hybrid-gpu-<cohort>-smoke`` Job as a plain manifest carries no label; its
        name and its GPU request say what it is.
        """
        if self.kind != "Job":
            return False
        if self.label(ownership.SMOKE_JOB_LABEL) == "true":
            return True
        names = [self.name, self.metadata.get("name")]
        if not any(isinstance(n, str) and SMOKE_NAME.search(n) for n in names):
            return False
        pod = self.pod_spec
        return isinstance(pod, dict) and requests_gpu(pod)

    @property
    def is_ledger(self) -> bool:
        """Tell whether this is the ledger ConfigMap."""
        if self.resource_type != CONFIG_MAP_TYPE:
            return False
        if self.label(ownership.LEDGER_LABEL) == "true":
            return True
        return self.metadata.get("name") == ownership.LEDGER_NAME

    # ---- Helm

    @property
    def is_helm(self) -> bool:
        """Tell whether this is a Helm Chart or Release resource."""
        return self.resource_type in HELM_TYPES

    @property
    def inputs_hidden(self) -> bool:
        """Tell whether this is a Chart whose inputs the analyzer does not get (empty props).

        A ``helm.sh/v4:Chart`` (remote component) or ``helm.sh/v3:Chart`` (SDK component) arrives with
        ``{}``; a Release, a custom resource, arrives with its inputs.
        """
        if self.resource_type not in CHART_TYPES:
            return False
        return not any(key in self.props for key in ("chart", "version", "values"))

    @property
    def chart_stamp(self) -> Any:
        """``(chart reference, version)`` from the ``eks-hybrid-gpu.io/chart`` annotation, None, or UNKNOWN."""
        raw = self.annotation(ownership.CHART_ANNOTATION)
        if raw is UNKNOWN:
            return UNKNOWN
        if not isinstance(raw, str) or "@" not in raw:
            return None
        reference, _, version = raw.rpartition("@")
        return reference, version

    @property
    def rendered_chart_owner(self) -> str | None:
        """Which allocation owner's chart rendered this object: the chart annotation, else ``helm.sh/chart``."""
        stamp = self.chart_stamp
        if isinstance(stamp, tuple):
            owner = classify_chart(stamp[0])
            if owner is not None:
                return owner
        label = self.label(HELM_CHART_LABEL)
        return classify_chart(label) if isinstance(label, str) else None

    @property
    def is_nfd(self) -> bool:
        """Tell whether this object belongs to Node Feature Discovery (its own chart or a subchart)."""
        if self.label(APP_NAME_LABEL) == NFD_NAME:
            return True
        label = self.label(HELM_CHART_LABEL)
        return isinstance(label, str) and label.startswith((f"{NFD_NAME}-", "nfd-"))

    @property
    def chart_owner(self) -> str | None:
        """Which allocation owner this Helm resource installs, if any."""
        if not self.is_helm:
            return None
        chart = self.props.get("chart")
        return classify_chart(chart) if isinstance(chart, str) else None

    @property
    def values(self) -> Any:
        """The Helm values (a dict, or UNKNOWN); values that are not a map are recorded as unreadable."""
        value = self.props.get("values")
        if value is not None and value is not UNKNOWN and not isinstance(value, dict):
            self.cannot_read("values", "is not a map")
        return value if value is UNKNOWN else as_dict(value)

    # ---- workloads

    @property
    def pod_spec(self) -> Any:
        """The pod spec of a workload (a dict), UNKNOWN, or None."""
        if not self.is_kubernetes:
            return None
        path = POD_SPEC_PATHS.get(self.kind)
        if path is None:
            return None
        spec = dig(self.props, *path)
        if spec is UNKNOWN:
            return UNKNOWN
        if isinstance(spec, dict):
            return spec
        if spec is not None or self.props.get("spec") is not None:
            self.cannot_read(".".join(path), "is not an object (a pod spec)")
        return None

    def env_value(self, container: Container, name: str) -> Any:
        """A variable of a container's effective env, as the kubelet builds it: a string, None, or UNKNOWN.

        A variable set through ``valueFrom``, or one an ``envFrom`` source may set, cannot be read from this object:
        it is recorded (fail closed) and UNKNOWN is returned, so no check assumes the default instead.
        """
        env = effective_env(container.spec, lambda kind, found: None)
        if env.unknown and name not in env.entries:
            return UNKNOWN
        entry = env.entries.get(name)
        where = f"container '{container.name}' env {name}"
        if entry is not None and entry.source != "env":
            self.cannot_read(where, f"comes from {entry.source}, which this check cannot read")
            return UNKNOWN
        if entry is None and env.cannot_tell:
            sources = "; ".join(why.split(" is not in this stack", 1)[0] for why in env.cannot_tell)
            self.cannot_read(where, f"may be set by {sources}, which this check cannot read")
            return UNKNOWN
        if entry is None:
            return None
        return entry.value if entry.value is UNKNOWN or isinstance(entry.value, str) else None

    def read_pod(self) -> Any:
        """The pod spec like :attr:`pod_spec`, with every field the rules read checked for its type first.

        A field of the wrong type (containers that are not a list of objects, env that is not a list, a
        nodeSelector that is not a map of strings, ...) is recorded in :attr:`problems`: the kubelet, scheduler
        and API server read these fields by type, so a rule that skipped them would judge a different pod.
        """
        pod = self.pod_spec
        if not isinstance(pod, dict):
            return pod
        base = ".".join(POD_SPEC_PATHS[self.kind])
        for key in ("nodeSelector",):
            value = pod.get(key)
            if value is not None and value is not UNKNOWN and string_map(_known(value)) is None:
                self.cannot_read(f"{base}.{key}", "is not a map of strings")
        terms = dig(pod, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(terms, dict):
            listed = terms.get("nodeSelectorTerms")
            if listed is not None and listed is not UNKNOWN and not isinstance(listed, list):
                self.cannot_read(
                    f"{base}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
                    "is not a list",
                )
        for list_key in ("containers", "initContainers", "ephemeralContainers", "volumes", "resourceClaims"):
            value = pod.get(list_key)
            if value is None or value is UNKNOWN:
                continue
            if not isinstance(value, list) or any(not isinstance(v, dict) and v is not UNKNOWN for v in value):
                self.cannot_read(f"{base}.{list_key}", "is not a list of objects")
        for container in containers(pod):
            where = f"{base}.{container.field_name}[{container.index}]"
            for list_key in ("env", "envFrom"):
                value = container.spec.get(list_key)
                if value is None or value is UNKNOWN:
                    continue
                if not isinstance(value, list) or any(not isinstance(v, dict) and v is not UNKNOWN for v in value):
                    self.cannot_read(f"{where}.{list_key}", "is not a list of objects")
            resources = container.spec.get("resources")
            if resources is not None and resources is not UNKNOWN and not isinstance(resources, dict):
                self.cannot_read(f"{where}.resources", "is not an object")
            for table in ("requests", "limits"):
                value = dig(resources, table)
                if value is not None and value is not UNKNOWN and not isinstance(value, dict):
                    self.cannot_read(f"{where}.resources.{table}", "is not a map")
        return pod


def _known(value: Any) -> Any:
    """A map with its unknown values dropped (unknown during preview is not a wrong type)."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if v is not UNKNOWN}
    return value


def classify_chart(chart: str) -> str | None:
    """Map a chart reference (name, repo/name, OCI URL, archive path) to its owner."""
    base = chart.strip().rstrip("/").rsplit("/", 1)[-1]
    base = re.sub(r"\.tgz$", "", base)
    base = re.split(r"[:@]", base, maxsplit=1)[0]
    base = re.sub(r"-v?\d+\.\d+\.\d+.*$", "", base)
    if base == "nvidia-device-plugin":
        return DEVICE_PLUGIN
    if base in {"dra-driver-nvidia-gpu", "nvidia-dra-driver-gpu"}:
        return DRA
    if base == "gpu-operator":
        return GPU_OPERATOR
    return None


CHART_VERSION_PATHS: Final[Mapping[str, str]] = {
    DEVICE_PLUGIN: f"{PROJECT}:charts.devicePlugin.version",
    DRA: f"{PROJECT}:charts.draDriver.version",
    GPU_OPERATOR: f"{PROJECT}:charts.gpuOperator.version",
}


# --------------------------------------------------------------------------- pods


@dataclass(frozen=True)
class Container:
    """One container of a pod spec, with where it sits."""

    field_name: str
    index: int
    spec: dict[str, Any]

    @property
    def name(self) -> str:
        """The container name, or its position when unnamed."""
        name = self.spec.get("name")
        if isinstance(name, str) and name:
            return name
        return f"{self.field_name}[{self.index}]"

    @property
    def requests(self) -> dict[str, Any]:
        """``resources.requests``."""
        return as_dict(dig(self.spec, "resources", "requests"))

    @property
    def limits(self) -> dict[str, Any]:
        """``resources.limits``."""
        return as_dict(dig(self.spec, "resources", "limits"))

    @property
    def claims(self) -> list[Any]:
        """``resources.claims`` (DRA)."""
        return as_list(dig(self.spec, "resources", "claims"))

    def resource_names(self) -> set[str]:
        """Every resource name in requests or limits."""
        return {str(k) for k in (*self.requests, *self.limits)}

    @property
    def env(self) -> list[dict[str, Any]]:
        """The env entries that are dicts."""
        return [e for e in as_list(self.spec.get("env")) if isinstance(e, dict)]

    def env_value(self, name: str) -> Any:
        """The literal value of an env entry: a string, None (absent or valueFrom), or UNKNOWN."""
        raw = self.spec.get("env")
        if raw is UNKNOWN:
            return UNKNOWN
        for entry in self.env:
            if entry.get("name") == name:
                value = entry.get("value")
                return value if value is UNKNOWN or isinstance(value, str) else None
        return None

    @property
    def command_line(self) -> list[str]:
        """``command`` + ``args`` as strings."""
        parts = [*as_list(self.spec.get("command")), *as_list(self.spec.get("args"))]
        return [p for p in parts if isinstance(p, str)]


def containers(pod: dict[str, Any]) -> list[Container]:
    """Every init, regular and ephemeral container of a pod spec."""
    result: list[Container] = []
    for field_name in ("initContainers", "containers", "ephemeralContainers"):
        for index, spec in enumerate(as_list(pod.get(field_name))):
            if isinstance(spec, dict):
                result.append(Container(field_name, index, spec))
    return result


def is_device_plugin_gpu(resource_name: str) -> bool:
    """``nvidia.com/gpu*`` or ``nvidia.com/mig-*``: GPUs from the device plugin."""
    return resource_name.startswith(("nvidia.com/gpu", "nvidia.com/mig-"))


def requests_gpu(pod: dict[str, Any]) -> bool:
    """Tell whether a pod asks for a GPU: an ``nvidia.com/*`` request or limit, or a DRA claim."""
    if pod_claims(pod):
        return True
    return any(name.startswith("nvidia.com/") for c in containers(pod) for name in c.resource_names())


def pod_placement(pod: dict[str, Any]) -> Placement | None:
    """Where a pod can run (nodeSelector + required node affinity), or None while either is unknown."""
    selector = string_map(pod_node_selector(pod))
    terms = required_node_terms(pod.get("affinity"))
    if selector is None or terms is UNKNOWN or contains_unknown(terms):
        return None
    return Placement.of(selector, terms)


def pod_claims(pod: dict[str, Any]) -> list[Any]:
    """Return the pod's ``resourceClaims``."""
    return as_list(pod.get("resourceClaims"))


def pod_node_selector(pod: dict[str, Any]) -> Any:
    """Return the pod's nodeSelector (dict), or UNKNOWN."""
    value = pod.get("nodeSelector")
    return UNKNOWN if value is UNKNOWN else as_dict(value)


def required_node_terms(affinity: Any) -> Any:
    """Return the required nodeAffinity terms (list), None if absent, or UNKNOWN."""
    terms = dig(
        affinity,
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms",
    )
    if terms is UNKNOWN:
        return UNKNOWN
    return terms if isinstance(terms, list) else None


# --------------------------------------------------------------------------- selectors


def selector_confines(workload: Mapping[str, Any], cohort: Mapping[str, str]) -> bool:
    """Tell whether a workload nodeSelector only admits nodes of the cohort."""
    if not cohort:
        return False
    return all(workload.get(key) == value for key, value in cohort.items())


def pod_volumes(pod: dict[str, Any]) -> Any:
    """The pod's volumes that are dicts, or UNKNOWN."""
    raw = pod.get("volumes")
    if raw is UNKNOWN:
        return UNKNOWN
    return [v for v in as_list(raw) if isinstance(v, dict)]


def cr_flag(resource: Resource, component: str) -> Any:
    """``spec.<component>.enabled`` of an Operator CR (the CRD defaults it to true): True/False, UNKNOWN, or None.

    The field is typed boolean: any other value cannot be judged (recorded on the resource).
    """
    raw = dig(resource.props, "spec", component, "enabled")
    if raw is None:
        return True
    if raw is UNKNOWN or isinstance(raw, bool):
        return raw
    resource.cannot_read(f"spec.{component}.enabled", "is not a boolean")
    return None


def cr_mode(resource: Resource) -> str | None:
    """``cluster-policy``/``gpu-cluster`` for a rendered Operator CR object."""
    if not resource.api_group_version.startswith("nvidia.com/"):
        return None
    if resource.kind == "ClusterPolicy":
        return "cluster-policy"
    if resource.kind == "GPUCluster":
        return "gpu-cluster"
    return None


# --------------------------------------------------------------------------- fail closed

Validator = Callable[[ResourceValidationArgs, ReportViolation], None]


def reads_pods(resource: Resource) -> bool:
    """A policy that judges pod templates reads every workload kind."""
    return resource.is_kubernetes and resource.kind in POD_SPEC_PATHS


def reads_pods_and_helm(resource: Resource) -> bool:
    """A policy that judges pod templates and chart values."""
    return resource.is_helm or reads_pods(resource)


def fail_closed(
    reads: Callable[[Resource], bool], kinds: frozenset[str] | None = None
) -> Callable[[Validator], Validator]:
    """Wrap a resource validator: what it could not read on an object it ``reads`` is a violation, never silence.

    The pod template of such an object is type-checked first (:meth:`Resource.read_pod`); a validator that
    found nothing to judge ("not applicable") on an object with unreadable fields reports those fields instead.
    ``kinds``: the only kinds the validator judges (others go straight to it, without copying their props).
    """

    def wrap(validate: Validator) -> Validator:
        @functools.wraps(validate)
        def run(args: ResourceValidationArgs, report: ReportViolation) -> None:
            if kinds is not None and args.resource_type.rsplit(":", 1)[-1] not in kinds:
                validate(args, report)
                return
            resource = Resource.from_args(args)
            relevant = reads(resource)
            if relevant:
                resource.read_pod()
            try:
                validate(args, report)
            except _NotApplicableError:
                if not (relevant and resource.problems):
                    raise
            if relevant:
                report_findings(resource.problems.values(), report, with_urn=False)

        return run

    return wrap
