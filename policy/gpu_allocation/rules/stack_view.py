"""All resources of a stack, with the GPU installations and the ledger found: what a stack policy reads.

Which Chart or Release installs which owner, and which objects it rendered, is decided once per stack view
(:meth:`StackView.installations`); every stack policy asks it, so the families agree on what a stack installs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from pulumi_policy import PolicyResource, ReportViolation, StackValidationArgs

from ..vocab.labels import GPU_OPERATOR
from ..vocab.parsing import load_yaml
from .charts import HELM_TYPES, RELEASE_TYPE
from .findings import Finding, report_findings
from .installations import Installation
from .ledger import Ledger, parse_ledger
from .operator_crs import cr_mode
from .props import UNKNOWN, as_dict, contains_unknown
from .resource import Resource
from .shapes import POD_SPEC_PATHS


@dataclass
class StackView:
    """All resources of a stack, with the GPU installations and the ledger found."""

    resources: list[Resource]
    by_urn: dict[str, Resource]
    _installations: dict[str, Installation] | None = None
    _named: dict[tuple[str, str], list[Resource]] | None = None

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
        resources += [r for release in list(resources) for r in extra_objects(release, kinds)]
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
        """Every resource with a known pod spec (its fields checked for their types: :meth:`Resource.read_pod`)."""
        for resource in self.resources:
            pod = resource.read_pod()
            if isinstance(pod, dict):
                yield resource, pod

    def named(self, kind: str, name: str) -> list[Resource]:
        """The core/v1 objects of a kind (ConfigMap, Secret) with this metadata.name."""
        if self._named is None:
            self._named = {}
            for resource in self.resources:
                found = resource.metadata.get("name")
                if resource.resource_type.startswith("kubernetes:core/v1:") and isinstance(found, str):
                    self._named.setdefault((resource.kind, found), []).append(resource)
        return self._named.get((kind, name), [])

    def problems(self, reads: Callable[[Resource], bool] | None = None) -> list[Finding]:
        """What the checks so far could not read, on the objects ``reads`` selects (all read objects by default)."""
        return [f for r in self.resources if r.problems and (reads is None or reads(r)) for f in r.problems.values()]


INSTALL_KINDS: Final = frozenset({*POD_SPEC_PATHS, "ConfigMap", "ClusterPolicy", "GPUCluster"})
"""The kinds the install model reads besides Helm resources: workloads (allocators, and the chart labels that name a
Chart v4's owner), ConfigMaps (plugin configs, the ledger) and the Operator's CRs. A check that needs no CRD (the
largest objects of a GPU stack) passes these to :meth:`StackView.from_args` and pays for no more."""


def reads_gpu_objects(resource: Resource) -> bool:
    """What the stack families read: workloads, ConfigMaps (configs, the ledger), Helm resources, Operator CRs, CRDs."""
    return (
        resource.is_helm
        or resource.kind in POD_SPEC_PATHS
        or resource.kind in {"ConfigMap", "CustomResourceDefinition"}
        or cr_mode(resource) is not None
    )


def not_applicable_unless_unreadable(
    args: StackValidationArgs,
    view: StackView,
    reason: str,
    report: ReportViolation,
    reads: Callable[[Resource], bool] = reads_gpu_objects,
) -> None:
    """Say "not applicable", unless an object that cannot be read may be what the check looks for (fail closed)."""
    list(view.workloads())
    unreadable = view.problems(reads)
    if unreadable:
        report_findings(unreadable, report)
        return
    args.not_applicable(reason)


def extra_objects(release: Resource, kinds: frozenset[str] | None = None) -> list[Resource]:
    """The objects a GPU Operator Release renders from its ``extraObjects`` values, as objects of the stack.

    The Operator chart renders every entry of ``extraObjects`` as a manifest of its own (gpu-operator
    ``templates/extra-objects.yaml``: ``tpl (toYaml .)`` of a map, ``tpl`` of a string), so a ClusterPolicy or an
    allocator DaemonSet put there is created beside what the values say. A Release hides what it renders from the
    analyzer, but these values are visible: each entry becomes a :class:`Resource` without a parent (its own install,
    its own CR), named by where it comes from. A string holding a template (``{{``), or one that does not parse, cannot
    be read: recorded on the Release (fail closed).
    """
    if release.resource_type != RELEASE_TYPE or release.chart_owner != GPU_OPERATOR:
        return []
    values = release.values
    items = values.get("extraObjects") if isinstance(values, dict) else None
    if items is None or items is UNKNOWN:
        return []
    if not isinstance(items, list):
        release.cannot_read("values extraObjects", "is not a list")
        return []
    found: list[Resource] = []
    for index, item in enumerate(items):
        where = f"values extraObjects[{index}]"
        if isinstance(item, str):
            if "{{" in item:
                release.cannot_read(where, "is a template the chart renders with tpl, which this policy does not run")
                continue
            item, error = load_yaml(item)
            if error is not None:
                release.cannot_read(where, error)
                continue
        if item is UNKNOWN or contains_unknown(item):
            continue
        api_version, kind = as_dict(item).get("apiVersion"), as_dict(item).get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str):
            release.cannot_read(where, "is no Kubernetes object (apiVersion and kind)")
            continue
        if kinds is not None and kind not in kinds:
            continue
        group_version = api_version if "/" in api_version else f"core/{api_version}"
        found.append(
            Resource(
                resource_type=f"kubernetes:{group_version}:{kind}",
                name=f"{release.name}-extraObjects-{index}",
                urn=f"{release.urn}/extraObjects[{index}]",
                props=as_dict(item),
                origin=f"{where} of {release.describe}",
            )
        )
    return found


def _kind(resource: PolicyResource) -> str:
    return resource.resource_type.rsplit(":", 1)[-1]
