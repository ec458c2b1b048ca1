"""Kubernetes pod shapes as the rules see them: where a workload keeps its pod spec, its containers, its placement.

Plain data in (props already copied by :func:`.props.plain`), no Pulumi imports: :mod:`.resource` wraps one object
of a stack, and the rules read its pod template through these helpers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..vocab.selectors import Placement
from .props import UNKNOWN, as_dict, as_list, contains_unknown, dig, string_map

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

APP_NAME_LABEL: Final = "app.kubernetes.io/name"
"""Kubernetes' recommended name label, set by the charts on their workloads (``vocab.owners.owner_of_app_label``)."""


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


def node_selection(node_selector: Any, affinity: Any) -> Placement | None:
    """The one reader of where a pod may land: its nodeSelector and required node affinity, as the scheduler reads them.

    kube-scheduler's NodeAffinity filter (``pkg/scheduler/framework/plugins/nodeaffinity``, through
    ``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``): a node must match every nodeSelector entry *and*
    one of the required ``nodeSelectorTerms`` (terms ORed, the ``matchExpressions`` of a term ANDed, with ``In``,
    ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt``). The preferred terms do not filter. None while a part is
    unknown during preview or not of its type (a type problem is recorded by :meth:`.resource.Resource.read_pod`).
    Every rule that asks where a pod (or an allocator a chart's values place) may land reads it here.
    """
    if node_selector is UNKNOWN:
        return None
    selector = string_map(as_dict(node_selector)) if node_selector is not None else {}
    terms = required_node_terms(affinity)
    if selector is None or terms is UNKNOWN or contains_unknown(terms):
        return None
    return Placement.of(selector, terms)


def pod_placement(pod: dict[str, Any]) -> Placement | None:
    """Where a pod can run (:func:`node_selection` of its spec), or None while either part is unknown."""
    return node_selection(pod.get("nodeSelector"), pod.get("affinity"))


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


def pod_volumes(pod: dict[str, Any]) -> Any:
    """The pod's volumes that are dicts, or UNKNOWN."""
    raw = pod.get("volumes")
    if raw is UNKNOWN:
        return UNKNOWN
    return [v for v in as_list(raw) if isinstance(v, dict)]


# --------------------------------------------------------------------------- field types


def pod_type_problems(pod: dict[str, Any], base: str) -> Iterator[tuple[str, str]]:
    """(field, why) for every field the rules read whose type is wrong; ``base`` is the pod spec's path.

    The kubelet, scheduler and API server read these fields by type, so a rule that skipped a containers field that
    is not a list of objects, an env that is not a list or a nodeSelector that is not a map of strings would judge a
    different pod. A value unknown during preview is not a wrong type.
    """
    for key in ("nodeSelector",):
        value = pod.get(key)
        if value is not None and value is not UNKNOWN and string_map(_known(value)) is None:
            yield f"{base}.{key}", "is not a map of strings"
    terms = dig(pod, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(terms, dict):
        listed = terms.get("nodeSelectorTerms")
        if listed is not None and listed is not UNKNOWN and not isinstance(listed, list):
            yield (
                f"{base}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
                "is not a list",
            )
    for list_key in ("containers", "initContainers", "ephemeralContainers", "volumes", "resourceClaims"):
        value = pod.get(list_key)
        if value is None or value is UNKNOWN:
            continue
        if not _list_of_objects(value):
            yield f"{base}.{list_key}", "is not a list of objects"
    for container in containers(pod):
        where = f"{base}.{container.field_name}[{container.index}]"
        for list_key in ("env", "envFrom"):
            value = container.spec.get(list_key)
            if value is None or value is UNKNOWN:
                continue
            if not _list_of_objects(value):
                yield f"{where}.{list_key}", "is not a list of objects"
        resources = container.spec.get("resources")
        if resources is not None and resources is not UNKNOWN and not isinstance(resources, dict):
            yield f"{where}.resources", "is not an object"
        for table in ("requests", "limits"):
            value = dig(resources, table)
            if value is not None and value is not UNKNOWN and not isinstance(value, dict):
                yield f"{where}.resources.{table}", "is not a map"


def _list_of_objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, dict) or v is UNKNOWN for v in value)


def _known(value: Any) -> Any:
    """A map with its unknown values dropped (unknown during preview is not a wrong type)."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if v is not UNKNOWN}
    return value
