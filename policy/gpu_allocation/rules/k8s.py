"""Shared helpers for the rule modules.

Policies receive resource inputs as pulumi-policy proxies: ``Mapping``/``Sequence``
wrappers that raise ``UnknownValueError`` when a value is not known during preview.
Every rule first turns the proxy into plain data with :func:`plain`, which replaces
unknown values by the :data:`UNKNOWN` marker, so that a rule can decide explicitly
what an unknown value means (usually: skip that check) and never crashes.

The module also knows the shapes the rules inspect: pod templates in every workload
kind, node selectors and affinities, Kubernetes quantities, Helm chart resources,
the ownership labels stamped by the program (see ``policy.gpu_allocation.vocab.labels``) and the
ledger ConfigMap.

What the analyzer really receives (captured in ``tests/fixtures/policy/real/``): a
``kubernetes:helm.sh/v4:Chart`` is a remote component, so its props are EMPTY in
resource and in stack validation. Its inputs (``chart``, ``version``, ``values``) are
never visible; the objects it renders are, each with its full manifest, its parent URN
pointing at the Chart, and the program's stamps (owner/cohort labels, node-selector,
sharing, config-path and chart annotations). A ``helm.sh/v3:Release`` is a custom
resource: its inputs, values included, are visible, its rendered objects are not.
:class:`Installation` answers the rules' questions from the values where they are
visible and from the rendered objects otherwise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final

from pulumi_policy import PolicyResource, ResourceValidationArgs, StackValidationArgs
from pulumi_policy.proxy import (
    UNKNOWN_ARCHIVE_VALUE,
    UNKNOWN_ARRAY_VALUE,
    UNKNOWN_ASSET_VALUE,
    UNKNOWN_BOOLEAN_VALUE,
    UNKNOWN_NUMBER_VALUE,
    UNKNOWN_OBJECT_VALUE,
    UNKNOWN_STRING_VALUE,
    UnknownValueError,
    _DictProxy,
    _ListProxy,
)

from ..vocab import allocators
from ..vocab import labels as ownership
from ..vocab.selectors import Placement
from .parsing import load_json

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

# --------------------------------------------------------------------------- unknowns


class _Unknown:
    """The type of :data:`UNKNOWN`: a value not known during preview."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        """Return the one instance."""
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        """Render as in violation messages."""
        return "<unknown during preview>"


UNKNOWN: Final[_Unknown] = _Unknown()
"""Marker for a value that is not known during preview."""

_SENTINELS: Final = frozenset(
    {
        UNKNOWN_BOOLEAN_VALUE,
        UNKNOWN_NUMBER_VALUE,
        UNKNOWN_STRING_VALUE,
        UNKNOWN_ARRAY_VALUE,
        UNKNOWN_ASSET_VALUE,
        UNKNOWN_ARCHIVE_VALUE,
        UNKNOWN_OBJECT_VALUE,
    }
)


_PROXIES: Final = (_DictProxy, _ListProxy)


def plain(value: Any) -> Any:
    """Copy policy props into plain dicts/lists, replacing unknowns by UNKNOWN."""
    if type(value) in _PROXIES:  # an exact type check: isinstance would take the slow ABC path for every value
        # The SDK's unknown-checking proxies wrap plain containers in which an unknown is its sentinel
        # string. Copying the wrapped container gives what the item-by-item reads below give (a read of a
        # sentinel raises UnknownValueError there, and becomes UNKNOWN), at a fraction of the cost: this
        # copy runs once per resource per policy and dominated the pack's own time (bench/README.md).
        value = value["__target"]
    if isinstance(value, str):
        return UNKNOWN if value in _SENTINELS else value
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        for key in list(value):
            try:
                item = value[key]
            except UnknownValueError:
                result[str(key)] = UNKNOWN
                continue
            result[str(key)] = plain(item)
        return result
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        items: list[Any] = []
        for index in range(len(value)):
            try:
                item = value[index]
            except UnknownValueError:
                items.append(UNKNOWN)
                continue
            items.append(plain(item))
        return items
    return value


def readable(props: Any) -> dict[str, Any]:
    """Plain props of one object; ``{}`` ("cannot tell") when they nest too deeply to walk."""
    try:
        return as_dict(plain(props))
    except RecursionError:
        return {}


def contains_unknown(value: Any) -> bool:
    """Tell whether plain data holds an unknown value anywhere."""
    if value is UNKNOWN:
        return True
    if isinstance(value, dict):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_unknown(v) for v in value)
    return False


# --------------------------------------------------------------------------- access


def as_dict(value: Any) -> dict[str, Any]:
    """Return ``value`` if it is a dict, else an empty dict."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """Return ``value`` if it is a list, else an empty list."""
    return value if isinstance(value, list) else []


def dig(value: Any, *path: str | int) -> Any:
    """Follow ``path`` through dicts and lists: None if absent, UNKNOWN if unknown."""
    for key in path:
        if value is UNKNOWN:
            return UNKNOWN
        if isinstance(key, int):
            if not isinstance(value, list) or not -len(value) <= key < len(value):
                return None
            value = value[key]
        elif isinstance(value, dict):
            value = value.get(key)
        else:
            return None
    return value


def as_bool(value: Any) -> bool | _Unknown | None:
    """Read a Helm-style boolean: True/False, "true"/"false", None, or UNKNOWN."""
    if isinstance(value, _Unknown):
        return value
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in {"true", "false"}:
        return value.lower() == "true"
    return None


def one_of(value: Any, options: Iterable[str]) -> bool:
    """Tell whether ``value`` is one of the strings (never hashes a non-string)."""
    return isinstance(value, str) and value in set(options)


def string_map(value: Any) -> dict[str, str] | None:
    """Return a dict of string keys and values, or None if it is not one."""
    if not isinstance(value, dict):
        return None
    if not all(isinstance(v, str) for v in value.values()):
        return None
    return dict(value)


def _integral(value: Any) -> Any:
    """Turn integral floats back into ints (the engine sends every number as a float)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


def compact_json(value: Any) -> str:
    """Render a value as the program does: compact JSON with sorted keys."""
    return json.dumps(_integral(value), sort_keys=True, separators=(",", ":"), default=repr)


def show(value: Any) -> str:
    """Render an offending value for a message."""
    if value is UNKNOWN:
        return repr(UNKNOWN)
    if isinstance(value, str):
        return f"'{value}'"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return compact_json(value)


# --------------------------------------------------------------------------- config


def config_int(config: Mapping[str, Any], key: str, default: int) -> int:
    """Read an integer policy-config value (JSON numbers arrive as floats)."""
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return int(value)


def config_bool(config: Mapping[str, Any], key: str, default: bool) -> bool:
    """Read a boolean policy-config value."""
    value = config.get(key, default)
    return value if isinstance(value, bool) else default


def config_strings(config: Mapping[str, Any], key: str, default: Sequence[str]) -> tuple[str, ...]:
    """Read a list-of-strings policy-config value."""
    value = config.get(key)
    if isinstance(value, Sequence) and not isinstance(value, str):
        return tuple(str(v) for v in value)
    return tuple(default)


def config_mapping(config: Mapping[str, Any], key: str) -> dict[str, str]:
    """Read a string-to-string policy-config value."""
    value = config.get(key)
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    return {}


# --------------------------------------------------------------------------- resources


@dataclass
class Resource:
    """One resource as a rule sees it: its type, names and plain props."""

    resource_type: str
    name: str
    urn: str
    props: dict[str, Any]
    parent_urn: str | None = None

    @classmethod
    def from_args(cls, args: ResourceValidationArgs) -> Resource:
        """Build from the arguments of a resource policy."""
        return cls(
            resource_type=args.resource_type,
            name=args.name,
            urn=args.urn,
            props=readable(args.props),
            parent_urn=getattr(args.opts, "parent", None) or None,
        )

    @classmethod
    def from_stack(cls, resource: PolicyResource, *, read: bool = True) -> Resource:
        """Build from one resource of a stack policy; ``read=False`` keeps its place in the tree, not its props."""
        parent = resource.parent.urn if resource.parent is not None else None
        if parent is None:
            parent = getattr(resource.opts, "parent", None) or None
        return cls(
            resource_type=resource.resource_type,
            name=resource.name,
            urn=resource.urn,
            props=readable(resource.props) if read else {},
            parent_urn=parent,
        )

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
        if not isinstance(raw, str):
            return None
        value, error = load_json(raw)
        return None if error is not None else string_map(value)

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
        """The Helm values (a dict, or UNKNOWN)."""
        value = self.props.get("values")
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
        return spec if isinstance(spec, dict) else None


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


# --------------------------------------------------------------------------- stack view

_PLUGIN_BINARY: Final = allocators.DEVICE_PLUGIN_BINARY


def pod_volumes(pod: dict[str, Any]) -> Any:
    """The pod's volumes that are dicts, or UNKNOWN."""
    raw = pod.get("volumes")
    if raw is UNKNOWN:
        return UNKNOWN
    return [v for v in as_list(raw) if isinstance(v, dict)]


def _is_plugin_container(container: Container) -> bool:
    if container.field_name != "containers":
        return False
    return allocators.container_owner(container.spec) == (DEVICE_PLUGIN, "allocator")


def is_allocator_daemonset(resource: Resource, owner: str) -> bool:
    """The DaemonSet that allocates GPUs for ``owner``: the device plugin itself, or the DRA kubelet plugin."""
    if not resource.is_kubernetes or not resource.is_allocator or resource.identity is None:
        return False
    return resource.identity[0] == owner


@dataclass
class Setting:
    """One answer an installation gives, and where it comes from (for messages)."""

    value: Any
    subject: str
    """The object and field, e.g. ``… Chart 'x' values migStrategy`` or ``… DaemonSet 'y' … env MIG_STRATEGY``."""
    defaulted: bool = False
    """The value is the chart's default (nothing set it)."""


@dataclass
class Installation:
    """One GPU allocation owner installed by a Helm Chart or Release.

    A Release (and a Chart in tests that carry inputs) shows its values; a Chart v4 shows nothing itself,
    and every question is answered from the objects it rendered (``children``).
    """

    owner: str
    resource: Resource
    children: list[Resource] = field(default_factory=list)
    standalone: bool = False
    """An allocator DaemonSet with no Helm Chart/Release above it (a plain manifest, a ConfigGroup, a rendered
    ``helm template``): the install is the DaemonSet itself, and every answer comes from what it renders."""

    @property
    def inputs_visible(self) -> bool:
        """Tell whether the Helm inputs (values, skipCrds, ...) are visible."""
        return not self.standalone and not self.resource.inputs_hidden

    @property
    def describe(self) -> str:
        """The Helm resource, for messages."""
        return self.resource.describe

    @property
    def values(self) -> Any:
        """The Helm values (dict) or UNKNOWN; ``{}`` when the inputs are hidden."""
        return self.resource.values

    def value(self, *path: str) -> Any:
        """One Helm value: None if absent (or hidden), UNKNOWN if unknown."""
        return dig(self.values, *path)

    def rendered(self, child: Resource) -> str:
        """Name a rendered object and the Chart that rendered it (a standalone install is the object itself)."""
        if self.standalone:
            return child.describe
        return f"{child.describe} (rendered by {self.describe})"

    @property
    def cohorts(self) -> list[str]:
        """The cohort labels stamped on the rendered children, sorted."""
        return sorted({c.cohort for c in self.children if c.cohort})

    @property
    def sharing(self) -> str | None:
        """The sharing annotation stamped on the rendered children, if any."""
        for child in self.children:
            value = child.annotation(ownership.SHARING_ANNOTATION)
            if isinstance(value, str):
                return value
        return None

    @property
    def main_workload(self) -> Resource | None:
        """The rendered allocator DaemonSet (device plugin or DRA kubelet plugin), if rendered."""
        return next((c for c in self.children if is_allocator_daemonset(c, self.owner)), None)

    def _main_pod(self) -> tuple[Resource, dict[str, Any]] | None:
        main = self.main_workload
        if main is None:
            return None
        pod = main.pod_spec
        return (main, pod) if isinstance(pod, dict) else None

    @property
    def selector(self) -> Any:
        """The cohort nodeSelector (dict), None if it cannot be told, or UNKNOWN."""
        return self.selector_setting.value

    @property
    def selector_setting(self) -> Setting:
        """The nodeSelector of the allocator: values, else the rendered allocator DaemonSet."""
        key = "kubeletPlugin.nodeSelector" if self.owner == DRA else "nodeSelector"
        if self.owner not in {DEVICE_PLUGIN, DRA}:
            return Setting(None, self.describe)
        if self.inputs_visible:
            raw = self.value(*key.split("."))
            if raw is UNKNOWN or contains_unknown(raw):
                return Setting(UNKNOWN, f"{self.describe} (values {key})")
            return Setting(string_map(raw) if raw is not None else {}, f"{self.describe} (values {key})")
        found = self._main_pod()
        if found is None:
            return Setting(None, self.describe)
        main, pod = found
        raw = pod_node_selector(pod)
        if raw is UNKNOWN or contains_unknown(raw):
            return Setting(UNKNOWN, f"{self.rendered(main)} (nodeSelector)")
        return Setting(string_map(raw), f"{self.rendered(main)} (nodeSelector)")

    @property
    def placement_setting(self) -> Setting:
        """Where the allocator can run (a Placement: nodeSelector + required node affinity), None or UNKNOWN."""
        selector = self.selector_setting
        if not isinstance(selector.value, dict):
            return selector
        if self.inputs_visible:
            base = self.value("kubeletPlugin") if self.owner == DRA else self.values
            terms = required_node_terms(dig(base, "affinity"))
        else:
            found = self._main_pod()
            terms = required_node_terms(found[1].get("affinity")) if found is not None else None
        if terms is UNKNOWN or contains_unknown(terms):
            terms = None
        return Setting(Placement.of(selector.value, terms), selector.subject)

    @property
    def stamped(self) -> bool:
        """Tell whether this program stamped what the install renders."""
        return any(child.stamped for child in self.children)

    def config_path(self, suffix: str, default: str) -> str:
        """Return the stack-config path stamped on a child, plus ``suffix``; for a foreign install, the object."""
        for child in self.children:
            stamped = child.annotation(ownership.CONFIG_PATH_ANNOTATION)
            if isinstance(stamped, str) and stamped:
                return f"{stamped}{suffix}"
        if not self.stamped and default.startswith(f"{PROJECT}:"):
            return f"the {suffix.lstrip('.') or 'settings'} of {self.describe}"
        return default

    # ---- device plugin

    def mig_strategy(self) -> Setting:
        """The device plugin's MIG strategy: values ``migStrategy``, else the rendered ``MIG_STRATEGY`` env."""
        if self.inputs_visible:
            raw = self.value("migStrategy")
            return Setting("none" if raw is None else raw, f"{self.describe} values migStrategy", raw is None)
        found = self._main_pod()
        if found is None:
            return Setting(UNKNOWN, self.describe)
        main, pod = found
        plugin = next((c for c in containers(pod) if _is_plugin_container(c)), None)
        if plugin is None:
            return Setting(UNKNOWN, self.describe)
        raw = plugin.env_value("MIG_STRATEGY")
        subject = f"{self.rendered(main)} container '{plugin.name}' env MIG_STRATEGY"
        return Setting("none" if raw is None else raw, subject, raw is None)

    def nfd(self) -> Setting:
        """Whether this install runs Node Feature Discovery (True/False/UNKNOWN) and why."""
        if self.inputs_visible:
            if self.values is UNKNOWN:
                return Setting(UNKNOWN, self.describe)
            nfd = as_bool(self.value("nfd", "enabled"))
            if self.owner == DEVICE_PLUGIN:
                gfd = as_bool(self.value("gfd", "enabled"))
                if nfd is UNKNOWN or (nfd is None and gfd is UNKNOWN):
                    return Setting(UNKNOWN, self.describe)
                detail = "nfd.enabled=true" if nfd is True else "gfd.enabled=true"
                return Setting(nfd is True or (nfd is None and gfd is True), f"{self.describe} ({detail})")
            if self.owner == GPU_OPERATOR:
                if nfd is UNKNOWN:
                    return Setting(UNKNOWN, self.describe)
                detail = "nfd.enabled=true (default)" if nfd is None else "nfd.enabled=true"
                return Setting(nfd is True or nfd is None, f"{self.describe} ({detail})")
            return Setting(False, self.describe)
        rendered = [c for c in self.children if c.is_nfd and c.kind in {"DaemonSet", "Deployment"}]
        if not rendered:
            return Setting(False, self.describe)
        names = ", ".join(sorted(r.describe for r in rendered))
        return Setting(True, f"{self.describe} (renders {names})")

    # ---- DRA

    def driver_root(self) -> Setting:
        """The DRA driver root: values ``nvidiaDriverRoot`` (default ``/``), else the rendered env/hostPath."""
        if self.inputs_visible:
            raw = self.value("nvidiaDriverRoot")
            if raw is UNKNOWN:
                return Setting(UNKNOWN, self.describe)
            return Setting("/" if raw is None else raw, f"{self.describe} values nvidiaDriverRoot", raw is None)
        found = self._main_pod()
        if found is None:
            return Setting(UNKNOWN, self.describe)
        main, pod = found
        for container in sorted(containers(pod), key=lambda c: c.field_name != "containers"):
            raw = container.env_value("NVIDIA_DRIVER_ROOT")
            if raw is UNKNOWN:
                return Setting(UNKNOWN, self.describe)
            if isinstance(raw, str):
                return Setting(raw, f"{self.rendered(main)} container '{container.name}' env NVIDIA_DRIVER_ROOT")
        volumes = pod_volumes(pod)
        if volumes is UNKNOWN:
            return Setting(UNKNOWN, self.describe)
        for volume in volumes:
            path = dig(volume, "hostPath", "path")
            if volume.get("name") == "driver-root" and (isinstance(path, str) or path is UNKNOWN):
                return Setting(path, f"{self.rendered(main)} volume driver-root hostPath.path")
        return Setting(UNKNOWN, self.describe)

    @property
    def skips_crds(self) -> Any:
        """The ``skipCrds`` input: True, False/None, or UNKNOWN."""
        return as_bool(self.resource.props.get("skipCrds"))

    # ---- GPU Operator

    @property
    def custom_resources(self) -> list[Resource]:
        """The rendered ClusterPolicy/GPUCluster objects."""
        return [c for c in self.children if cr_mode(c) is not None]

    @property
    def mode(self) -> Any:
        """The Operator mode: from the values, else from the rendered CR objects."""
        if self.inputs_visible:
            return operator_mode(self.values)
        modes = {cr_mode(c) for c in self.custom_resources}
        if len(modes) > 1:
            return "both"
        return next(iter(modes), None)

    def setting(self, *path: str) -> Any:
        """An Operator setting (e.g. ``driver.enabled``): the values, else the rendered CR's spec."""
        if self.inputs_visible:
            return self.value(*path)
        for resource in sorted(self.custom_resources, key=lambda r: r.kind != "ClusterPolicy"):
            return dig(resource.props, "spec", *path)
        return None


@dataclass
class Ledger:
    """The parsed ledger ConfigMap."""

    resource: Resource
    known: bool
    error: str | None = None
    cohorts: dict[str, dict[str, Any]] = field(default_factory=dict)
    operator_mode: Any = None


@dataclass
class StackView:
    """All resources of a stack, with the GPU installations and the ledger found."""

    resources: list[Resource]
    by_urn: dict[str, Resource]
    _installations: dict[str, Installation] | None = None

    @classmethod
    def from_args(cls, args: StackValidationArgs, kinds: frozenset[str] | None = None) -> StackView:
        """Build from the arguments of a stack policy.

        ``kinds``: read the props of Helm resources and of these kinds only (a check that needs no more pays for
        no more: copying props is most of the pack's cost); every resource keeps its place in the parent tree.
        """
        resources = [
            Resource.from_stack(r, read=kinds is None or r.resource_type in HELM_TYPES or _kind(r) in kinds)
            for r in args.resources
        ]
        return cls(resources, {r.urn: r for r in resources})

    def ancestors(self, resource: Resource) -> Iterator[Resource]:
        """Walk the parent chain."""
        seen: set[str] = set()
        urn = resource.parent_urn
        while urn and urn in self.by_urn and urn not in seen:
            seen.add(urn)
            parent = self.by_urn[urn]
            yield parent
            urn = parent.parent_urn

    def helm_ancestor(self, resource: Resource) -> Resource | None:
        """The nearest Helm Chart/Release above a resource, if any."""
        return next((p for p in self.ancestors(resource) if p.is_helm), None)

    def _found(self) -> dict[str, Installation]:
        if self._installations is not None:
            return self._installations
        found: dict[str, Installation] = {}
        hidden: dict[str, list[str]] = {}
        for resource in self.resources:
            owner = resource.chart_owner
            if owner is not None:
                found[resource.urn] = Installation(owner, resource)
            elif resource.inputs_hidden:
                hidden[resource.urn] = []
        # A Chart whose inputs are hidden installs the owner its rendered objects name.
        # The chart's own labels or annotation name it; a chart that carries neither (a team's wrapper chart)
        # is named by the allocator it renders.
        for resource in self.resources:
            chart = self.helm_ancestor(resource)
            if chart is not None and chart.urn in hidden:
                owner = resource.rendered_chart_owner
                if owner is None and resource.is_allocator and resource.identity is not None:
                    owner = resource.identity[0]
                if owner is not None:
                    hidden[chart.urn].append(owner)
        for resource in self.resources:
            votes = hidden.get(resource.urn)
            if votes:
                found[resource.urn] = Installation(max(sorted(set(votes)), key=votes.count), resource)
        # An allocator DaemonSet that no GPU Chart/Release rendered is an install of its own.
        for resource in self.resources:
            if resource.is_allocator and resource.identity is not None:
                if self._installation_urn(resource, found) is None:
                    found[resource.urn] = Installation(resource.identity[0], resource, standalone=True)
        for resource in self.resources:
            urn = self._installation_urn(resource, found)
            if urn is not None:
                found[urn].children.append(resource)
        ordered = {r.urn: found[r.urn] for r in self.resources if r.urn in found}
        self._installations = ordered
        return ordered

    def _installation_urn(self, resource: Resource, found: dict[str, Installation]) -> str | None:
        own = found.get(resource.urn)
        if own is not None and own.standalone:
            return resource.urn
        for parent in self.ancestors(resource):
            if parent.urn in found:
                return parent.urn
        return None

    def installation_urn(self, resource: Resource) -> str | None:
        """Return the URN of the GPU Chart/Release that rendered a resource, if any."""
        return self._installation_urn(resource, self._found())

    def installations(self) -> list[Installation]:
        """Every Helm resource that installs a GPU allocation owner."""
        return list(self._found().values())

    def installation_of(self, resource: Resource) -> Installation | None:
        """The installation that rendered a resource, if any."""
        urn = self.installation_urn(resource)
        return self._found().get(urn) if urn is not None else None

    def by_owner(self, owner: str) -> list[Installation]:
        """Return the installations of one owner."""
        return [i for i in self.installations() if i.owner == owner]

    def ledger(self) -> Ledger | None:
        """Return the parsed ledger ConfigMap, if the stack has one."""
        for resource in self.resources:
            if resource.is_ledger:
                return parse_ledger(resource)
        return None

    def workloads(self) -> Iterator[tuple[Resource, dict[str, Any]]]:
        """Every resource with a known pod spec."""
        for resource in self.resources:
            pod = resource.pod_spec
            if isinstance(pod, dict):
                yield resource, pod


def _kind(resource: PolicyResource) -> str:
    return resource.resource_type.rsplit(":", 1)[-1]


def parse_ledger(resource: Resource) -> Ledger:
    """Read ``data["ownership.json"]`` of the ledger ConfigMap."""
    raw = dig(resource.props, "data", ownership.LEDGER_KEY)
    if raw is UNKNOWN:
        return Ledger(resource, known=False)
    if not isinstance(raw, str):
        return Ledger(resource, known=True, error="has no ownership.json key")
    document, error = load_json(raw)
    if error is not None:
        return Ledger(resource, known=True, error=error)
    if not isinstance(document, dict) or not isinstance(document.get("cohorts"), dict):
        return Ledger(resource, known=True, error="has no 'cohorts' object")
    cohorts = {str(name): entry for name, entry in document["cohorts"].items() if isinstance(entry, dict)}
    return Ledger(
        resource,
        known=True,
        cohorts=cohorts,
        operator_mode=document.get("operatorMode"),
    )


def operator_mode(values: Any) -> Any:
    """Return the GPU Operator mode from its values.

    Returns ``cluster-policy``, ``gpu-cluster``, ``both``, None (no CR) or UNKNOWN.
    ``clusterPolicy.deployCR`` defaults to true, ``gpuCluster.deployCR`` to false.
    """
    if values is UNKNOWN:
        return UNKNOWN
    cluster_policy = as_bool(dig(values, "clusterPolicy", "deployCR"))
    gpu_cluster = as_bool(dig(values, "gpuCluster", "deployCR"))
    if cluster_policy is UNKNOWN or gpu_cluster is UNKNOWN:
        return UNKNOWN
    cluster_policy_on = cluster_policy is not False
    gpu_cluster_on = gpu_cluster is True
    if cluster_policy_on and gpu_cluster_on:
        return "both"
    if gpu_cluster_on:
        return "gpu-cluster"
    if cluster_policy_on:
        return "cluster-policy"
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
