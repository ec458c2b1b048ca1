"""Ownership policies: one GPU allocation owner per node, one Operator CR per cluster.

Seed: "Choose one allocation owner per GPU", "do not install duplicate allocation
managers", "GPUCluster ... cannot coexist with ClusterPolicy", "Do not install an
additional standalone DRA release for an Operator-managed deployment", "Do not deploy a
second discovery controller". The CRD and NFD conflicts are listed in charts.md §5.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Final

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from ..vocab import labels as vocab
from ..vocab.selectors import Placement, placements_overlap
from .installations import (
    Installation,
    Ledger,
    StackView,
)
from .parsing import contained
from .props import (
    UNKNOWN,
    as_dict,
    compact_json,
    dig,
    show,
    string_map,
)
from .readers import report_findings
from .shapes import (
    DEVICE_PLUGIN,
    DRA,
    GPU_OPERATOR,
    LABELS_NOTE,
    NFD_NAME,
    POD_SPEC_PATHS,
    PROJECT,
    Resource,
    cr_flag,
    cr_mode,
    pod_placement,
)

COMPUTE_DOMAIN_CRDS: Final = (
    "computedomains.resource.nvidia.com",
    "computedomaincliques.resource.nvidia.com",
)
"""CRDs shipped by both the DRA chart and the GPU Operator chart (charts.md §5)."""

_CRD_KIND: Final = "CustomResourceDefinition"


_FOREIGN_FIELDS: Final = {
    ".nodeSelector": "the nodeSelector (or required node affinity) of the allocator pods",
    ".owner": "the allocator",
}
"""What to change on an install without stamps, per config-path suffix."""


def _cohort_path(name: str, suffix: str) -> str:
    return f"{PROJECT}:cohorts[i]{suffix} (the entry of cohort '{name}')"


# --------------------------------------------------------------------------- units


@dataclass
class _Unit:
    """Everything the stack says about one cohort (or one unlabelled install)."""

    key: str
    cohort: str | None
    owners: dict[str, list[str]] = field(default_factory=dict)
    selectors: list[tuple[Placement, str]] = field(default_factory=list)
    config_path: str | None = None
    urn: str | None = None
    installs: dict[str, str] = field(default_factory=dict)
    foreign: str | None = None
    """For an install this program did not stamp: the object, named in messages instead of a config path."""

    @property
    def title(self) -> str:
        if self.cohort is not None:
            return f"cohort '{self.cohort}'"
        if self.foreign is not None:
            return self.foreign
        return f"installation '{self.key}'"

    def path(self, suffix: str) -> str:
        if self.config_path is not None:
            return f"{self.config_path}{suffix}"
        if self.foreign is not None:
            field_name = _FOREIGN_FIELDS.get(suffix, suffix.lstrip("."))
            return f"{field_name} of {self.foreign}"
        return _cohort_path(self.cohort or self.key, suffix)

    def add_owner(self, owner: str, source: str, urn: str | None) -> None:
        self.owners.setdefault(owner, []).append(source)
        if self.urn is None:
            self.urn = urn


def _units(view: StackView, ledger: Ledger | None) -> dict[str, _Unit]:
    units: dict[str, _Unit] = {}

    def unit(key: str, cohort: str | None) -> _Unit:
        return units.setdefault(key, _Unit(key, cohort))

    for resource in view.resources:
        owner = resource.owner
        if owner is None or resource.is_ledger:
            continue
        cohort = resource.cohort
        key = cohort or view.installation_urn(resource) or resource.urn
        current = unit(key, cohort)
        current.add_owner(owner, resource.describe, resource.urn)
        stamped = resource.annotation(vocab.CONFIG_PATH_ANNOTATION)
        if current.config_path is None and isinstance(stamped, str) and stamped:
            current.config_path = stamped
        selector = resource.stamped_selector
        if selector is not None:
            current.selectors.append((Placement.of(selector), f"{resource.describe} ({vocab.SELECTOR_ANNOTATION})"))
        pod = resource.read_pod()
        # Per-node allocators (DaemonSets) and smoke Jobs follow the cohort selector; NFD labels every node
        # by design, and a chart's controller or webhook Deployment runs a few replicas anywhere.
        if isinstance(pod, dict) and not resource.is_nfd and resource.kind != "Deployment":
            placement = pod_placement(pod)
            if placement is not None:
                current.selectors.append((placement, f"{resource.describe} (nodeSelector)"))

    if ledger is not None and ledger.known:
        for name, entry in ledger.cohorts.items():
            current = unit(name, name)
            owner = entry.get("owner")
            if isinstance(owner, str):
                current.add_owner(owner, ledger.resource.describe, None)
            selector = string_map(entry.get("nodeSelector"))
            if selector is not None:
                current.selectors.append((Placement.of(selector), f"{ledger.resource.describe} (cohort '{name}')"))

    for install in view.installations():
        if install.owner == GPU_OPERATOR:
            continue
        setting = install.placement_setting
        placement = setting.value
        keys = install.cohorts or _matching_cohorts(units, install.owner, placement)
        for key in keys or [install.resource.urn]:
            current = unit(key, key if keys else None)
            if not keys and not install.stamped:
                current.foreign = install.describe
            current.add_owner(install.owner, install.describe, None if install.stamped else install.resource.urn)
            current.installs[install.resource.urn] = install.describe
            # A stamped allocator's rendered placement is already among the unit's selectors.
            known = any(s == placement for s, _ in current.selectors) and not install.inputs_visible
            if isinstance(placement, Placement) and not known:
                current.selectors.append((placement, setting.subject))
    return units


def _matching_cohorts(units: dict[str, _Unit], owner: str, placement: Any) -> list[str]:
    """Cohorts of ``owner`` with exactly this nodeSelector, for a Chart whose children are not visible."""
    if not isinstance(placement, Placement):
        return []
    return sorted(
        u.key
        for u in units.values()
        if u.cohort is not None and owner in u.owners and any(s.selector == placement.selector for s, _ in u.selectors)
    )


# --------------------------------------------------------------------------- checks


def _summarize(sources: list[str]) -> str:
    """Name the Helm installs of an owner, else its first two objects."""
    unique = sorted(set(sources))
    shown = [s for s in unique if ":helm.sh/" in s] or unique[:2]
    rest = len(unique) - len(shown)
    return ", ".join(shown) + (f" and {rest} more" if rest > 0 else "")


def _check_cohort_owners(units: dict[str, _Unit], report: ReportViolation) -> None:
    for current in units.values():
        if len(current.installs) > 1:
            message = (
                f"{current.title} is installed by {len(current.installs)} Helm resources: "
                f"{', '.join(sorted(current.installs.values()))}. Two allocators on the same nodes "
                "advertise the same physical GPUs twice. Keep one install per cohort "
                f"({current.path('')}). {LABELS_NOTE}"
            )
            report(message, sorted(current.installs)[1])
        if len(current.owners) < 2:
            continue
        listing = "; ".join(f"{owner} ({_summarize(sources)})" for owner, sources in sorted(current.owners.items()))
        message = (
            f"{current.title} has {len(current.owners)} GPU allocation owners: "
            f"{listing}. Two owners on one node advertise the same physical GPUs "
            f"twice and over-admit workloads. Set {current.path('.owner')} to exactly "
            f"one of {', '.join(sorted(current.owners))} and give the other owner its "
            f"own cohort with a disjoint nodeSelector. {LABELS_NOTE}"
        )
        report(message, current.urn)


def _first_of_each(selectors: list[tuple[Placement, str]]) -> list[tuple[Placement, str]]:
    """The first occurrence of each distinct placement, in order (each stamped object repeats its cohort's)."""
    seen: set[Placement] = set()
    found = []
    for placement, source in selectors:
        if placement not in seen:
            seen.add(placement)
            found.append((placement, source))
    return found


def _show_placement(placement: Placement) -> str:
    shown = f"nodeSelector {compact_json(placement.node_selector)}"
    if placement.terms:
        terms = [[{"key": k, "operator": o, "values": list(v)} for k, o, v in term] for term in placement.terms]
        shown += f" + required nodeAffinity {compact_json(terms)}"
    return shown


def _check_disjoint(units: dict[str, _Unit], report: ReportViolation) -> None:
    ordered = sorted(units.values(), key=lambda u: u.key)
    # The first overlapping pair is always made of first occurrences, so comparing only those finds the
    # same pair (and reports the same sources) with far fewer comparisons: this check is quadratic in the
    # cohorts, and each cohort repeats its selector on every object it stamps.
    distinct = {id(u): _first_of_each(u.selectors) for u in ordered}
    for first, second in combinations(ordered, 2):
        overlap = next(
            ((a, b) for a in distinct[id(first)] for b in distinct[id(second)] if placements_overlap(a[0], b[0])),
            None,
        )
        if overlap is None:
            continue
        (selector_a, source_a), (selector_b, source_b) = overlap
        owners_a = ", ".join(sorted(first.owners)) or "unknown owner"
        owners_b = ", ".join(sorted(second.owners)) or "unknown owner"
        message = (
            f"{first.title} ({owners_a}, {_show_placement(selector_a)} "
            f"from {source_a}) and {second.title} ({owners_b}, "
            f"{_show_placement(selector_b)} from {source_b}) can select the same nodes: "
            "one node can satisfy both placements (no label key has values that exclude each other), so a node "
            "matching both gets two allocation owners. Give the cohorts a key with different "
            f"values (e.g. {vocab.DEFAULT_COHORT_LABEL_KEY}=device-plugin vs =dra) in "
            f"{first.path('.nodeSelector')} and {second.path('.nodeSelector')}. "
            f"{LABELS_NOTE}"
        )
        report(message, first.urn or second.urn)


def _dra_workloads(view: StackView) -> list[Resource]:
    return [
        r
        for r in view.resources
        if r.owner == DRA and view.installation_urn(r) is None and r.kind in {"DaemonSet", "Deployment"}
    ]


def _check_operator_device_plugin(view: StackView, report: ReportViolation) -> None:
    plugins = [i.resource.describe for i in view.by_owner(DEVICE_PLUGIN)]
    plugins += [
        r.describe
        for r in view.resources
        if r.owner == DEVICE_PLUGIN and r.kind == "DaemonSet" and view.installation_urn(r) is None
    ]
    if not plugins:
        return
    for operator in view.by_owner(GPU_OPERATOR):
        if operator.values is UNKNOWN:
            continue
        if operator.mode not in {"cluster-policy", "both"}:
            continue
        enabled = operator.operand_enabled("devicePlugin")
        if enabled is not True:
            continue
        message = (
            f"{operator.resource.describe} deploys its own device plugin "
            f"(devicePlugin.enabled is {show(operator.setting('devicePlugin', 'enabled'))}"
            f", default true) while the standalone device plugin {', '.join(plugins)} "
            "also runs. ClusterPolicy operands are not restricted by the cohort "
            "nodeSelector, so both plugins advertise nvidia.com/gpu on the same GPUs. "
            "Set devicePlugin.enabled=false and gfd.enabled=false in the Operator "
            f"values, or move the cohort to the Operator ({PROJECT}:cohorts[i].owner: "
            f"gpu-operator). {LABELS_NOTE}"
        )
        report(message, operator.resource.urn)
    # A ClusterPolicy applied as a plain manifest (no Operator chart in this stack) deploys the plugin as well.
    for resource in view.resources:
        if cr_mode(resource) != "cluster-policy" or view.installation_of(resource) is not None:
            continue
        raw = dig(resource.props, "spec", "devicePlugin", "enabled")
        if cr_flag(resource, "devicePlugin") is not True:
            continue
        message = (
            f"{resource.describe} deploys the GPU Operator's own device plugin (spec.devicePlugin.enabled is "
            f"{show(raw)}, default true) while the standalone device plugin {', '.join(plugins)} also runs. "
            "ClusterPolicy operands are not restricted by a cohort nodeSelector, so both plugins advertise "
            "nvidia.com/gpu on the same GPUs. Set spec.devicePlugin.enabled: false (and spec.gfd.enabled: false) "
            f"in {resource.describe}, or remove the standalone plugin. {LABELS_NOTE}"
        )
        report(message, resource.urn)


def _check_gpu_cluster_vs_dra(view: StackView, report: ReportViolation) -> None:
    standalone = [i.resource.describe for i in view.by_owner(DRA)]
    standalone += [r.describe for r in _dra_workloads(view)]
    if not standalone:
        return
    sources = [
        (o.resource.describe, o.resource.urn) for o in view.by_owner(GPU_OPERATOR) if o.mode in {"gpu-cluster", "both"}
    ]
    sources += [(r.describe, r.urn) for r in view.resources if cr_mode(r) == "gpu-cluster"]
    for describe, urn in sources:
        message = (
            f"{describe} runs the GPU Operator in GPUCluster mode (gpuCluster.deployCR"
            f"=true) while the standalone DRA driver {', '.join(standalone)} is also "
            "installed. Both create the gpu.nvidia.com DeviceClasses and a DRA kubelet "
            "plugin; the guide forbids an additional standalone DRA release for an "
            f"Operator-managed deployment. Set {PROJECT}:operator.mode to "
            f"cluster-policy, or remove the dra cohort ({PROJECT}:cohorts[i].owner). "
            f"{LABELS_NOTE}"
        )
        report(message, urn)


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
            if resource.kind != _CRD_KIND or resource.metadata.get("name") != crd:
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


def _check_ledger(
    view: StackView,
    ledger: Ledger | None,
    require_ledger: bool,
    report: ReportViolation,
) -> None:
    stamped = [r for r in view.resources if r.owner and r.cohort and not r.is_ledger]
    installs = view.installations()
    if ledger is None:
        # The ledger is this program's contract: only a stack holding objects an owner of this program created
        # (stamped with owner and cohort) has one to keep.
        if require_ledger and stamped:
            message = (
                f"The stack installs GPU allocation owners but has no ledger ConfigMap "
                f"'{vocab.LEDGER_NAME}' (label {vocab.LEDGER_LABEL}=true), so the "
                "cohort -> owner map cannot be checked. Deploy the program's ledger, "
                "or set requireLedger=false in this policy's config (ownership-ledger-consistent)."
            )
            report(message, None)
        return
    if not ledger.known:
        return
    where = ledger.resource.describe
    if ledger.error is not None:
        message = (
            f"{where} {ledger.error}: data['{vocab.LEDGER_KEY}'] must hold "
            '{"cohorts": {...}, "operatorMode": ...}. Redeploy the ledger from the '
            f"typed stack config ({PROJECT}:cohorts)."
        )
        report(message, ledger.resource.urn)
        return
    _check_ledger_rendered(stamped, ledger, report)
    _check_ledger_owners(view, installs, ledger, report)


def _check_ledger_rendered(stamped: list[Resource], ledger: Ledger, report: ReportViolation) -> None:
    where = ledger.resource.describe
    reported: set[tuple[str, str]] = set()
    for resource in stamped:
        cohort = resource.cohort or ""
        entry = ledger.cohorts.get(cohort)
        path = resource.config_path("", _cohort_path(cohort, ""))
        problem: tuple[str, str] | None = None
        if entry is None:
            problem = ("missing", f"cohort '{cohort}' is not in {where}")
        elif entry.get("owner") != resource.owner:
            problem = (
                "owner",
                f"owner label {show(resource.owner)} disagrees with {where}, which "
                f"records owner {show(entry.get('owner'))} for cohort '{cohort}'",
            )
        else:
            selector = resource.stamped_selector
            recorded = string_map(entry.get("nodeSelector"))
            if selector is not None and recorded is not None and selector != recorded:
                problem = (
                    "selector",
                    f"annotation {vocab.SELECTOR_ANNOTATION} {compact_json(selector)} "
                    f"disagrees with {where}, which records nodeSelector "
                    f"{compact_json(recorded)} for cohort '{cohort}'",
                )
            sharing = resource.annotation(vocab.SHARING_ANNOTATION)
            recorded_sharing = entry.get("sharing")
            if (
                problem is None
                and isinstance(sharing, str)
                and isinstance(recorded_sharing, str)
                and sharing != recorded_sharing
            ):
                problem = (
                    "sharing",
                    f"annotation {vocab.SHARING_ANNOTATION} {show(sharing)} disagrees "
                    f"with {where}, which records sharing {show(recorded_sharing)} for "
                    f"cohort '{cohort}'",
                )
        if problem is None or (cohort, problem[0]) in reported:
            continue
        reported.add((cohort, problem[0]))
        message = (
            f"{resource.describe}: {problem[1]}. The ledger must agree with what is "
            f"rendered; redeploy both from {path} instead of editing either by hand. "
            f"{LABELS_NOTE}"
        )
        report(message, resource.urn)


def _check_ledger_owners(
    view: StackView,
    installs: list[Installation],
    ledger: Ledger,
    report: ReportViolation,
) -> None:
    where = ledger.resource.describe
    rendered_owners = {r.owner for r in view.resources if r.owner}
    rendered_owners |= {i.owner for i in installs}
    operator_cohorts = []
    for name, entry in sorted(ledger.cohorts.items()):
        owner = entry.get("owner")
        if owner == GPU_OPERATOR:
            operator_cohorts.append(name)
        if owner not in vocab.OWNERS:
            message = (
                f"{where} records owner {show(owner)} for cohort '{name}', which is "
                f"not one of {', '.join(vocab.OWNERS)}. Set "
                f"{_cohort_path(name, '.owner')} to a valid owner."
            )
            report(message, ledger.resource.urn)
        elif owner not in rendered_owners:
            message = (
                f"{where} records owner '{owner}' for cohort '{name}', but nothing in "
                "this stack installs that owner, so the ledger disagrees with what is "
                f"rendered. Redeploy the ledger from {_cohort_path(name, '.owner')}."
            )
            report(message, ledger.resource.urn)
    if len(operator_cohorts) > 1:
        message = (
            f"{where} records {len(operator_cohorts)} GPU Operator cohorts "
            f"({', '.join(operator_cohorts)}); the Operator cannot be pinned to a cohort, "
            "so a cluster has at most one Operator-owned cohort. Merge them or move "
            f"the others to device-plugin/dra in {PROJECT}:cohorts[i].owner."
        )
        report(message, ledger.resource.urn)
    operators = [i for i in installs if i.owner == GPU_OPERATOR]
    recorded = ledger.operator_mode
    for operator in operators:
        mode = operator.mode
        if mode is UNKNOWN or mode == "both":
            continue
        if recorded != mode:
            message = (
                f"{where} records operatorMode {show(recorded)} but "
                f"{operator.resource.describe} renders {show(mode)}. Set "
                f"{PROJECT}:operator.mode and redeploy both from the same config."
            )
            report(message, operator.resource.urn)
    if not operators and recorded is not None:
        message = (
            f"{where} records operatorMode {show(recorded)} but this stack installs no "
            f"GPU Operator. Remove {PROJECT}:operator.mode or install the Operator."
        )
        report(message, ledger.resource.urn)


# --------------------------------------------------------------------------- policies


def _gpu_stack(
    args: StackValidationArgs, report: ReportViolation, kinds: frozenset[str] | None = None
) -> StackView | None:
    """The stack's view, or None (reported not applicable) when it installs no GPU allocation owner."""
    view = StackView.from_args(args, kinds)
    if not view.installations() and not any(r.owner for r in view.resources):
        # An object that cannot be read may be an allocator: say so rather than "not applicable".
        unreadable = view.problems(_reads_ownership)
        if unreadable:
            report_findings(unreadable, report)
            return None
        args.not_applicable("the stack installs no GPU allocation owner")
        return None
    return view


def single_allocation_owner_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse two owners for one cohort and placements of two allocators that one node can satisfy."""
    view = _gpu_stack(args, report_violation)
    if view is None:
        return
    ledger = view.ledger()
    units = _units(view, ledger)
    # Independent checks: one that cannot walk a value (too deep to read) must not take the other with it, and
    # says so (fail closed).
    for name, check in (
        ("one owner per cohort", lambda: _check_cohort_owners(units, report_violation)),
        ("disjoint placements", lambda: _check_disjoint(units, report_violation)),
    ):
        if not contained(check):
            report_violation(_unfinished(name), None)
    report_findings(view.problems(_reads_ownership), report_violation)


def _unfinished(check: str) -> str:
    return (
        f"The check '{check}' could not finish: a value in this stack nests too deep to walk, so this policy "
        "cannot judge the stack and refuses it (fail closed). Find the deeply nested value (the other violations "
        "name unreadable fields) and flatten or remove it."
    )


def _reads_ownership(resource: Resource) -> bool:
    """The objects the ownership checks read: workloads, ConfigMaps (the ledger), Helm resources, Operator CRs, CRDs."""
    return resource.is_helm or resource.kind in _POD_KINDS or resource.kind in _OWNERSHIP_KINDS


_WORKLOAD_KINDS: Final = frozenset({"DaemonSet", "Deployment", "ClusterPolicy", "GPUCluster"})
_POD_KINDS: Final = frozenset(POD_SPEC_PATHS)
_OWNERSHIP_KINDS: Final = frozenset({"ConfigMap", _CRD_KIND, "ClusterPolicy", "GPUCluster"})


def operator_device_plugin_disabled_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse a ClusterPolicy Operator that deploys its own device plugin next to a standalone one."""
    view = _gpu_stack(args, report_violation, _WORKLOAD_KINDS)
    if view is not None:
        _check_operator_device_plugin(view, report_violation)
        report_findings(view.problems(_reads_ownership), report_violation)


def gpu_cluster_excludes_standalone_dra_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse a GPUCluster Operator next to a standalone DRA driver."""
    view = _gpu_stack(args, report_violation, _WORKLOAD_KINDS)
    if view is not None:
        _check_gpu_cluster_vs_dra(view, report_violation)
        report_findings(view.problems(_reads_ownership), report_violation)


def compute_domain_crds_one_owner_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse two installs of the compute-domain CRDs."""
    view = _gpu_stack(args, report_violation, _WORKLOAD_KINDS | {_CRD_KIND})
    if view is not None:
        _check_crd_owners(view, report_violation)
        report_findings(view.problems(_reads_ownership), report_violation)


def nfd_one_owner_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse two Node Feature Discovery installs."""
    view = _gpu_stack(args, report_violation, _WORKLOAD_KINDS)
    if view is not None:
        _check_nfd(view, report_violation)
        report_findings(view.problems(_reads_ownership), report_violation)


def ownership_ledger_consistent_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse a ledger that disagrees with what is rendered, and a program stack without one."""
    if not any(_stamped(r) for r in args.resources):
        args.not_applicable(
            "the ledger is this program's contract: the stack holds no object stamped by eks-hybrid-gpu"
        )
        return
    view = _gpu_stack(args, report_violation)
    if view is None:
        return
    require_ledger = args.get_config().get("requireLedger", True) is not False
    ledger = view.ledger()
    _check_ledger(view, ledger, require_ledger, report_violation)
    # The ledger's own unreadable data is reported by _check_ledger in its words.
    report_findings(
        (
            f
            for f in view.problems(_reads_ownership)
            if ledger is None or ledger.error is None or f.urn != ledger.resource.urn
        ),
        report_violation,
    )


def _stamped(resource: Any) -> bool:
    """A stamp without copying the props: the ledger label or any eks-hybrid-gpu.io/ label or annotation."""
    try:
        metadata = resource.props.get("metadata") or {}
        tables = [metadata.get("labels") or {}, metadata.get("annotations") or {}]
        prefix = f"{vocab.LABEL_PREFIX}/"
        return any(isinstance(key, str) and key.startswith(prefix) for table in tables for key in table)
    except (UnknownValueError, AttributeError, TypeError):
        return False


def operator_cr_exclusive_validator(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    """Refuse ClusterPolicy and GPUCluster together, and two Operator installs."""
    view = StackView.from_args(args)
    operators = view.by_owner(GPU_OPERATOR)
    crs = [r for r in view.resources if cr_mode(r) is not None]
    if not operators and not crs:
        args.not_applicable("the stack installs no GPU Operator")
        return
    modes: dict[str, list[str]] = {}
    first_urn: dict[str, str] = {}
    for operator in operators:
        mode = operator.mode
        values = as_dict(operator.values)
        if mode == "both" and not operator.inputs_visible:
            rendered = ", ".join(r.describe for r in operator.custom_resources)
            message = (
                f"{operator.resource.describe} renders both a ClusterPolicy and a GPUCluster ({rendered}): "
                "they cannot coexist (each controller refuses the other CR). Set "
                f"{PROJECT}:operator.mode to exactly one of cluster-policy or gpu-cluster."
            )
            report_violation(message, operator.resource.urn)
            continue
        if mode == "both":
            message = (
                f"{operator.resource.describe} sets clusterPolicy.deployCR="
                f"{show(_deploy_cr(values, 'clusterPolicy', default=True))} and "
                f"gpuCluster.deployCR={show(_deploy_cr(values, 'gpuCluster'))}: "
                "ClusterPolicy and GPUCluster cannot coexist (the chart fails with "
                "'cannot both be true' and each controller refuses the other CR). Set "
                f"{PROJECT}:operator.mode to exactly one of cluster-policy or "
                "gpu-cluster."
            )
            report_violation(message, operator.resource.urn)
            continue
        if isinstance(mode, str):
            modes.setdefault(mode, []).append(operator.resource.describe)
            first_urn.setdefault(mode, operator.resource.urn)
    for resource in crs:
        install = view.installation_of(resource)
        if install is not None and not install.inputs_visible:
            continue  # counted through its Chart above
        mode = cr_mode(resource) or ""
        modes.setdefault(mode, []).append(resource.describe)
        first_urn.setdefault(mode, resource.urn)
    if "cluster-policy" in modes and "gpu-cluster" in modes:
        message = (
            "ClusterPolicy ("
            f"{', '.join(modes['cluster-policy'])}) and GPUCluster "
            f"({', '.join(modes['gpu-cluster'])}) are both in this stack. GPUCluster "
            "is a greenfield singleton that cannot coexist with ClusterPolicy, and a "
            "leftover CR (resource-policy: keep) blocks the other mode until deleted. "
            f"Set {PROJECT}:operator.mode to one mode and delete the other CR."
        )
        report_violation(message, first_urn["gpu-cluster"])
    if len(operators) > 1:
        message = (
            f"{len(operators)} GPU Operator installs: "
            f"{', '.join(o.resource.describe for o in operators)}. A cluster has at "
            "most one Operator (one ClusterPolicy or one GPUCluster). Keep one "
            f"release and set {PROJECT}:operator.mode for it."
        )
        report_violation(message, operators[1].resource.urn)
    report_findings(view.problems(_reads_ownership), report_violation)


def _deploy_cr(values: dict[str, Any], key: str, *, default: bool = False) -> Any:
    raw = as_dict(values.get(key)).get("deployCR")
    return default if raw is None else raw


SINGLE_ALLOCATION_OWNER = StackValidationPolicy(
    name="single-allocation-owner",
    description=(
        "Every GPU node has at most one allocation owner: no cohort has two owners or two installs, and no node "
        "can satisfy the placements (nodeSelector and required node affinity) of two allocators."
    ),
    validate=single_allocation_owner_validator,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
    # Nothing to tune: only the enforcement level is configurable (one owner per GPU).
    config_schema=PolicyConfigSchema(properties={}),
    remediation_steps=(
        f"Give each cohort one owner in {PROJECT}:cohorts[i].owner and a nodeSelector "
        f"({PROJECT}:cohorts[i].nodeSelector) with a label key whose value differs "
        "from every other cohort; for an allocator this program did not install, change its own nodeSelector or "
        "required node affinity so that no node satisfies two allocators. Labels are scheduling inputs, not a "
        "security boundary."
    ),
    url="https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/index.html",
    tags=["ownership", "gpu"],
)

OPERATOR_DEVICE_PLUGIN_DISABLED = StackValidationPolicy(
    name="operator-device-plugin-disabled",
    description="A ClusterPolicy GPU Operator next to a standalone device plugin does not deploy its own plugin.",
    validate=operator_device_plugin_disabled_validator,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
    config_schema=PolicyConfigSchema(properties={}),
    remediation_steps=(
        "Set devicePlugin.enabled=false and gfd.enabled=false in the Operator values, or move the cohort to the "
        f"Operator ({PROJECT}:cohorts[i].owner: gpu-operator)."
    ),
    url="https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/index.html",
    tags=["ownership", "gpu-operator"],
)

GPU_CLUSTER_EXCLUDES_STANDALONE_DRA = StackValidationPolicy(
    name="gpu-cluster-excludes-standalone-dra",
    description="A GPUCluster GPU Operator manages DRA itself, so no standalone DRA driver runs beside it.",
    validate=gpu_cluster_excludes_standalone_dra_validator,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
    config_schema=PolicyConfigSchema(properties={}),
    remediation_steps=(
        f"Set {PROJECT}:operator.mode to cluster-policy, or remove the standalone DRA cohort "
        f"({PROJECT}:cohorts[i].owner)."
    ),
    url="https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/index.html",
    tags=["ownership", "dra", "gpu-operator"],
)

COMPUTE_DOMAIN_CRDS_ONE_OWNER = StackValidationPolicy(
    name="compute-domain-crds-one-owner",
    description="The cluster-scoped compute-domain CRDs are installed by one chart only.",
    validate=compute_domain_crds_one_owner_validator,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    config_schema=PolicyConfigSchema(properties={}),
    remediation_steps=(
        "Keep one owner of the compute-domain CRDs: set skipCrds: true on the standalone DRA Chart when the GPU "
        f"Operator owns them, or choose one owner in {PROJECT}:cohorts[i].owner."
    ),
    url="https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu",
    tags=["ownership", "dra"],
)

NFD_ONE_OWNER = StackValidationPolicy(
    name="nfd-one-owner",
    description="Node Feature Discovery is installed once, so two discovery controllers never fight over labels.",
    validate=nfd_one_owner_validator,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    config_schema=PolicyConfigSchema(properties={}),
    remediation_steps=(
        "Set nfd.enabled=false explicitly on every chart that does not own NFD (in the device plugin, "
        f"gfd.enabled=true alone turns NFD on); the program's charts follow {PROJECT}:cohorts[i].owner."
    ),
    url="https://kubernetes-sigs.github.io/node-feature-discovery/",
    tags=["ownership", "nfd"],
)

OWNERSHIP_LEDGER_CONSISTENT = StackValidationPolicy(
    name="ownership-ledger-consistent",
    description=(
        "A stack built by this program carries the ownership ledger, and the ledger agrees with what is rendered."
    ),
    validate=ownership_ledger_consistent_validator,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    config_schema=PolicyConfigSchema(
        properties={
            "requireLedger": {
                "type": "boolean",
                "default": True,
                "description": "Refuse a stack with stamped GPU objects but without the ledger ConfigMap.",
            }
        }
    ),
    remediation_steps=(
        f"Redeploy the ledger and the rendered objects from the same typed stack config ({PROJECT}:cohorts); "
        "never edit either by hand. Stacks this program did not build need no ledger."
    ),
    url="https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/index.html",
    tags=["ownership", "ledger"],
)

OPERATOR_CR_EXCLUSIVE = StackValidationPolicy(
    name="operator-cr-exclusive",
    description=("A cluster runs at most one GPU Operator, with either a ClusterPolicy or a GPUCluster, never both."),
    validate=operator_cr_exclusive_validator,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    # Nothing to tune: only the enforcement level is configurable (never both CRs).
    config_schema=PolicyConfigSchema(properties={}),
    remediation_steps=(
        f"Set {PROJECT}:operator.mode to cluster-policy or gpu-cluster (never both "
        "deployCR values true), install one Operator release, and delete a leftover CR "
        "of the other mode by hand; there is no in-place migration."
    ),
    url="https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/index.html",
    tags=["ownership", "gpu-operator"],
)

POLICIES: Final = (
    SINGLE_ALLOCATION_OWNER,
    OPERATOR_DEVICE_PLUGIN_DISABLED,
    GPU_CLUSTER_EXCLUDES_STANDALONE_DRA,
    COMPUTE_DOMAIN_CRDS_ONE_OWNER,
    NFD_ONE_OWNER,
    OWNERSHIP_LEDGER_CONSISTENT,
    OPERATOR_CR_EXCLUSIVE,
)
