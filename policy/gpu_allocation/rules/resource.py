"""One resource of a stack as the rules see it, and what it *is* from the object alone.

:class:`Resource` wraps one object (type, names, plain props, parent) and answers what it is without trusting its
installer (:mod:`..vocab.allocators`, :mod:`..vocab.owners`): the allocator or companion a workload runs, a GPU
Operator CR, a smoke Job, the ledger. The program's stamps (``eks-hybrid-gpu.io/*``, see ``vocab.labels``) refine
that answer with a config path; they never decide it. Fields it cannot read are recorded on it (fail closed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final

from pulumi_policy import PolicyResource, ResourceValidationArgs

from ..vocab import allocators
from ..vocab import labels as vocab
from ..vocab.labels import GPU_OPERATOR
from ..vocab.owners import owner_of_app_label, owner_of_chart
from ..vocab.parsing import load_json
from .charts import CHART_TYPES, HELM_CHART_LABEL, HELM_TYPES, NFD_NAME, chart_inputs_hidden
from .findings import Finding, cannot_judge
from .props import UNKNOWN, as_dict, dig, readable, string_map
from .readers import effective_env
from .shapes import APP_NAME_LABEL, POD_SPEC_PATHS, Container, pod_type_problems, requests_gpu

CONFIG_MAP_TYPE: Final = "kubernetes:core/v1:ConfigMap"
SMOKE_NAME: Final = re.compile(r"(^|[-_.])(smoke|validation|validate)([-_.]|$)", re.ASCII)
"""A Job name that says it is a smoke or validation Job (the guide's ``hybrid-gpu-<cohort>-smoke``)."""
OPERATOR_CR_MODES: Final = {"ClusterPolicy": "cluster-policy", "GPUCluster": "gpu-cluster"}
"""The GPU Operator's two CR kinds and the mode each one is."""


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
    origin: str | None = None
    """Where an object the stack does not hold as a resource comes from (``values extraObjects[0] of <Release>``)."""

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
        own = f"{self.resource_type} '{self.k8s_name or self.name}'"
        return own if self.origin is None else f"{own} (from {self.origin})"

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
        value = self.label(vocab.OWNER_LABEL)
        return value if isinstance(value, str) else None

    @cached_property
    def identity(self) -> tuple[str, str] | None:
        """(owner, role) recognised from the object alone, whoever installed it (:mod:`vocab.allocators`).

        A workload is judged by what its pod template runs; a ``ClusterPolicy``/``GPUCluster`` is the GPU
        Operator. Stamps, parents and the ledger play no part.
        """
        if self.operator_cr_mode is not None:
            return GPU_OPERATOR, "operator"
        pod = self.pod_spec
        if not isinstance(pod, dict):
            return None
        path = POD_SPEC_PATHS[self.kind][:-1]
        template_labels = as_dict(dig(self.props, *path, "metadata", "labels")) if path else self.labels
        return allocators.pod_owner(pod, template_labels if isinstance(template_labels, dict) else {})

    @property
    def operator_cr_mode(self) -> str | None:
        """``cluster-policy``/``gpu-cluster`` for a GPU Operator CR object (``nvidia.com/*`` ClusterPolicy/GPUCluster).

        Here, not in :mod:`.operator_crs`, so the layers stay one-way: ``operator_crs`` reads a :class:`Resource`,
        and this module imports nothing above it.
        """
        if not self.api_group_version.startswith("nvidia.com/"):
            return None
        return OPERATOR_CR_MODES.get(self.kind)

    def belongs_to(self, owner: str) -> bool:
        """Tell whether this object is part of ``owner``'s install, whoever installed it: the one recognition predicate.

        The program's stamp, the chart's app label, what the pod template runs (:attr:`identity`: images, binaries
        and component labels, old names included) or the chart that rendered it (:attr:`rendered_chart_owner`);
        every name comes from the registry (:mod:`..vocab.owners`).
        """
        if self.owner == owner or owner_of_app_label(self.label(APP_NAME_LABEL)) == owner:
            return True
        if self.identity is not None and self.identity[0] == owner:
            return True
        return self.rendered_chart_owner == owner

    @property
    def is_allocator(self) -> bool:
        """Tell whether this workload publishes GPUs to the kubelet (device plugin or DRA kubelet plugin)."""
        return self.kind == "DaemonSet" and self.identity is not None and self.identity[1] == "allocator"

    @cached_property
    def stamped(self) -> bool:
        """Tell whether this program stamped the object (an ``eks-hybrid-gpu.io/*`` label or annotation)."""
        prefix = f"{vocab.LABEL_PREFIX}/"
        for table in (self.labels, self.annotations):
            if isinstance(table, dict) and any(key.startswith(prefix) for key in table):
                return True
        return False

    @property
    def cohort(self) -> str | None:
        """The ``eks-hybrid-gpu.io/cohort`` label, if known."""
        value = self.label(vocab.COHORT_LABEL)
        return value if isinstance(value, str) else None

    def config_path(self, suffix: str, default: str) -> str:
        """Return the stamped stack-config path plus ``suffix``, else ``default``."""
        stamped = self.annotation(vocab.CONFIG_PATH_ANNOTATION)
        if isinstance(stamped, str) and stamped:
            return f"{stamped}{suffix}"
        return default

    @property
    def manifest_path(self) -> str:
        """Where to fix this object: its stamped stack-config path, else its own manifest."""
        return self.config_path("", f"the manifest of {self.describe}")

    @property
    def stamped_selector(self) -> dict[str, str] | None:
        """The cohort selector from the ``node-selector`` annotation, if readable."""
        raw = self.annotation(vocab.SELECTOR_ANNOTATION)
        if raw is None or raw is UNKNOWN:
            return None
        where = f"annotation {vocab.SELECTOR_ANNOTATION}"
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
        if self.label(vocab.SMOKE_JOB_LABEL) == "true":
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
        if self.label(vocab.LEDGER_LABEL) == "true":
            return True
        return self.metadata.get("name") == vocab.LEDGER_NAME

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

    def not_applicable_if_inputs_hidden(self, args: ResourceValidationArgs, checked: str) -> None:
        """End a policy on a Chart whose inputs it does not get: not applicable, naming what is checked instead.

        ``args.not_applicable`` raises, so the validator goes no further.
        """
        if self.inputs_hidden:
            args.not_applicable(chart_inputs_hidden(checked))

    @property
    def chart_stamp(self) -> Any:
        """``(chart reference, version)`` from the ``eks-hybrid-gpu.io/chart`` annotation, None, or UNKNOWN."""
        raw = self.annotation(vocab.CHART_ANNOTATION)
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
            owner = owner_of_chart(stamp[0])
            if owner is not None:
                return owner
        label = self.label(HELM_CHART_LABEL)
        return owner_of_chart(label) if isinstance(label, str) else None

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
        return owner_of_chart(chart) if isinstance(chart, str) else None

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
        for field_name, why in pod_type_problems(pod, base):
            self.cannot_read(field_name, why)
        return pod
