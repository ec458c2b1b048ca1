"""The example stacks, run through the real program under mocks, pass every mandatory policy.

What the pack is fed is what it gets in a real preview (tests/fixtures/policy/real/): under mocks a
Chart v4 registers its inputs and renders nothing, while the engine sends a Chart v4 to analyzers with
EMPTY props and every object it renders as its own resource. So each Chart v4 registration is replaced by
the Chart as the analyzer sees it (``{}``) plus the objects captured from a real preview of the same
chart (the local stack's device plugin and DRA driver, or the time-slicing / MIG device plugin of the
``plugin-variants`` capture), re-stamped with this stack's ownership (owner, cohort, selector, sharing,
config path and the ``<chart>@<version>`` it asked for). Releases (the GPU Operator), the ledger, the
DRA objects, the smoke Jobs and the namespaces are registered by the program itself and keep their
inputs, as in a real preview.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pulumi
import pytest
from pulumi.runtime import settings
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy

from cluster.judge.live import LiveCluster
from cluster.records.ledger import ledger_of
from cluster.records.migration import parse_migration
from cluster.records.read import Records
from components.config import StackConfig
from components.ownership_ledger import ownership_map
from components.stack import _ownership
from eks_hybrid_gpu.mocks import EKS_CLUSTER, RecordingMocks, run_program, stack_config
from policy.gpu_allocation.pack import build_policies
from policy.gpu_allocation.vocab import labels as vocab
from tests.support.configs import node_info
from tests.support.policy_harness import CHART_V4, ROOT, Harness, Item, rendered_by

pytestmark = pytest.mark.policy

STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))

CAPTURED = {
    ("device-plugin", "none"): ("local", "gpu-plugin-chart", "hybrid-gpu-plugin"),
    ("device-plugin", "time-slicing"): ("plugin-variants", "ts-chart", "hybrid-gpu-ts"),
    ("device-plugin", "mig-mixed"): ("plugin-variants", "mig-chart", "hybrid-gpu-mig"),
    ("dra", "none"): ("local", "gpu-dra-chart", "hybrid-gpu-dra"),
}
"""(owner, sharing) -> (capture, Chart name in it, its release name)."""


@pytest.fixture(autouse=True)
def _own_root_stack() -> Iterator[None]:
    """Give each program run its own root Stack and leave none behind: `set_mocks` reuses an existing root,
    so a root named after an example stack would otherwise parent the next test module's resources."""
    settings.ROOT.set(None)
    yield
    settings.ROOT.set(None)


class _Mocks(RecordingMocks):
    """Answer invokes with an empty failure list (the mock monitor iterates it)."""

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        answer, _ = super().call(args)
        return answer, []


def _nodes(config: dict[str, Any]) -> list[dict[str, Any]]:
    """One Hybrid node per cohort; nodes outside the Operator cohort opt out of its operands."""
    nodes = []
    for cohort in config.get("cohorts", []):
        selector = cohort.get("nodeSelector") or {
            vocab.COMPUTE_TYPE_LABEL: vocab.HYBRID,
            vocab.DEFAULT_COHORT_LABEL_KEY: cohort["owner"],
        }
        labels = dict(selector)
        if cohort["owner"] != "gpu-operator":
            labels[vocab.OPERANDS_OPT_OUT_LABEL] = "false"
        nodes.append(
            {"metadata": {"name": f"node-{cohort['name']}", "labels": labels}, "status": {"nodeInfo": node_info()}}
        )
    return nodes


def _as_analyzed(chart: Item, *configs: StackConfig) -> list[Item]:
    """A mock-registered Chart v4 as a real preview sends it: empty props, plus its rendered objects.

    `configs`: the stack's config, then any installed beside it (a move one node at a time installs a cohort's new
    owner beside the old, under the same release name: the chart's values tell which owner it is).
    """
    release = chart.props["name"]
    owner = "dra" if "kubeletPlugin" in chart.props["values"] else "device-plugin"
    config, index, cohort = next(
        (config, i, c)
        for config in configs
        for i, c in enumerate(config.cohorts)
        if f"hybrid-gpu-{c.name}" == release and c.owner == owner
    )
    stamp = replace(
        _ownership(config, index, cohort), chart=f"{chart.props['chart']}@{chart.props.get('version') or ''}"
    )
    capture, captured_chart, captured_release = CAPTURED[(cohort.owner, cohort.sharing_label)]
    records = json.loads(json.dumps(rendered_by(capture, captured_chart)).replace(captured_release, release))
    for record in records:
        annotations = record["props"]["metadata"]["annotations"]
        annotations[vocab.CHART_ANNOTATION] = stamp.chart
        if record["type"] == "kubernetes:core/v1:ConfigMap" and "config" in chart.props["values"]:
            record["props"]["data"] = chart.props["values"]["config"]["map"]  # the chart renders config.map as data
        kept = config.dra.extended_resource_name
        if kept is not None and record["type"] == "kubernetes:resource.k8s.io/v1:DeviceClass":
            if record["props"]["metadata"]["name"] == "gpu.nvidia.com":  # the chart's own mapping, which it keeps
                record["props"]["spec"]["extendedResourceName"] = kept
    rendered = Harness.chart_v4(
        chart.name,
        records,
        stamp.owner,
        stamp.cohort,
        dict(stamp.selector),
        sharing=stamp.sharing,
        index=index,
    )
    return [replace(rendered[0], parent=chart.parent), *rendered[1:]]


def _analyzed(stack: str, monkeypatch: pytest.MonkeyPatch) -> list[Item]:
    raw = stack_config(stack)
    # Declared, so the run does not depend on the EKS describe (tests/unit/test_stacks.py PRECHECK_BUG).
    raw.setdefault("cluster", {}).setdefault("kubernetesVersion", "1.34.4")
    nodes = _nodes(raw)
    monkeypatch.setattr("components.program.read_cluster", lambda *_args: LiveCluster([dict(n) for n in nodes]))
    recorder = run_program(raw, stack, _Mocks())
    config = StackConfig.model_validate(raw)
    names = {r.name for r in recorder.registrations}
    items: list[Item] = []
    for registration in recorder.registrations:
        if registration.type_.startswith("pulumi:providers:"):
            continue
        item = Item(
            registration.type_,
            registration.inputs,
            registration.name,
            registration.parent if registration.parent in names else None,
        )
        items += _as_analyzed(item, config) if item.resource_type == CHART_V4 else [item]
    return items


PLUGIN_HOSTS = {vocab.COMPUTE_TYPE_LABEL: vocab.HYBRID, vocab.DEFAULT_COHORT_LABEL_KEY: "device-plugin"}
MOVED_HOSTS = {**PLUGIN_HOSTS, vocab.ALLOCATOR_LABEL: "dra"}
OLD_HOSTS = {**PLUGIN_HOSTS, vocab.ALLOCATOR_LABEL: "device-plugin"}


def _moving_one_node_at_a_time(phase: str, monkeypatch: pytest.MonkeyPatch) -> list[Item]:
    """The device-plugin example stack declaring its DRA target and keeping nvidia.com/gpu on 1.37, analyzed as the
    program installs it in `phase` of `migrate` one node at a time (one node moved, one not)."""
    raw = stack_config("device-plugin")
    raw["cluster"]["kubernetesVersion"] = "1.37.2"
    raw["cohorts"][0] = {**raw["cohorts"][0], "owner": "dra"}
    raw["dra"] = {"extendedResourceName": "nvidia.com/gpu"}
    base = StackConfig.model_validate(_base_config_of(raw, "device-plugin", OLD_HOSTS))
    beside = StackConfig.model_validate(_base_config_of(raw, "dra", MOVED_HOSTS))
    record = {
        "cohort": "plugin",
        "from": "device-plugin",
        "to": "dra",
        "phase": phase,
        "nodeSelector": PLUGIN_HOSTS,
        "nodes": ["node-0", "node-1"],
        "toSelector": MOVED_HOSTS,
        "moved": ["node-0"],
    }
    ledger = ledger_of(ownership_map(base), "gpu-system/gpu-allocation-ledger")
    records = Records("gpu-system", ledger, parse_migration(record, "cm"))
    labels = {vocab.OPERANDS_OPT_OUT_LABEL: "false"}
    nodes = [
        {"metadata": {"name": name, "labels": {**hosts, **labels}}, "status": {"nodeInfo": node_info("v1.37.2-eks-1")}}
        for name, hosts in (("node-0", MOVED_HOSTS), ("node-1", OLD_HOSTS))
    ]
    monkeypatch.setattr("components.program.read_cluster", lambda *_args: LiveCluster(nodes, records=records))
    recorder = run_program(raw, "device-plugin", _Mocks(eks_cluster={**EKS_CLUSTER, "version": "1.37"}))
    items: list[Item] = []
    for registration in recorder.registrations:
        if registration.type_.startswith("pulumi:providers:"):
            continue
        item = Item(registration.type_, registration.inputs, registration.name, registration.parent)
        if item.resource_type != CHART_V4:
            items.append(item)
            continue
        analyzed = _as_analyzed(item, base, beside)
        if "kubeletPlugin" in item.props["values"]:  # the engine tells the two apart by their parents' types
            analyzed = [replace(i, name=i.name.replace(item.name, f"{item.name}-beside")) for i in analyzed]
            analyzed = [replace(i, parent=f"{item.name}-beside") if i.parent == item.name else i for i in analyzed]
        items += analyzed
    return items


def _base_config_of(raw: dict[str, Any], owner: str, selector: dict[str, str]) -> dict[str, Any]:
    cohorts = [{**raw["cohorts"][0], "owner": owner, "nodeSelector": selector}]
    dra = raw["dra"] if owner == "dra" else {}
    return {**raw, "cohorts": cohorts, "dra": dra}


@pytest.mark.parametrize("phase", ["install", "move-nodes", "remove"])
def test_a_cohort_moving_to_dra_one_node_at_a_time_passes_every_mandatory_policy(
    phase: str, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = _moving_one_node_at_a_time(phase, monkeypatch)
    charts = [i for i in items if i.resource_type == CHART_V4]
    assert len(charts) == (2 if phase != "remove" else 1)
    findings, idle = _mandatory(harness, items)
    assert findings == []
    assert "single-allocation-owner" not in idle
    assert "dra-extended-resource-one-publisher" not in idle  # both owners judged, on disjoint nodes


def test_an_owner_beside_on_the_same_nodes_is_refused_by_the_pack(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = _moving_one_node_at_a_time("install", monkeypatch)
    for item in items:
        spec = item.props.get("spec") if isinstance(item.props, dict) else None
        template = (spec or {}).get("template", {}).get("spec", {}) if isinstance(spec, dict) else {}
        if item.name.startswith("gpu-plugin-chart-beside") and isinstance(template.get("nodeSelector"), dict):
            template["nodeSelector"] = dict(OLD_HOSTS)
    findings = _mandatory_findings(harness, items)
    assert any(f.startswith("single-allocation-owner:") and "can select the same nodes" in f for f in findings)
    assert any(f.startswith("dra-extended-resource-one-publisher:") for f in findings)


def _mandatory(harness: Harness, items: list[Item]) -> tuple[list[str], list[str]]:
    """Every mandatory policy's findings, and the mandatory policies that had nothing in the stack to judge."""
    findings: list[str] = []
    idle: list[str] = []
    for policy in build_policies():
        if policy.enforcement_level != EnforcementLevel.MANDATORY:
            continue
        if isinstance(policy, StackValidationPolicy):
            outcomes = [harness.stack(policy, items)]
        elif isinstance(policy, ResourceValidationPolicy):
            outcomes = [harness.resource(policy, i.resource_type, i.props, name=i.name) for i in items]
        findings += [f"{policy.name}: {m}" for outcome in outcomes for m in outcome.messages]
        if not any(outcome.applied for outcome in outcomes):
            idle.append(policy.name)
    return findings, sorted(idle)


def _mandatory_findings(harness: Harness, items: list[Item]) -> list[str]:
    return _mandatory(harness, items)[0]


NO_OPERATOR = ["driver-ownership-consistent", "operator-cr-exclusive", "operator-hooks-kept"]
NO_MAPPING = ["dra-extended-resource-one-publisher"]
"""No example stack keeps the DRA chart's mapping (dra.extendedResourceName)."""
NO_PLAIN_REQUEST = [*NO_MAPPING, "dra-extended-resource-request-served"]
"""No plain nvidia.com/gpu request beside a DRA driver (local and mixed have one: the device-plugin smoke Job)."""
NO_CLASS = [*NO_PLAIN_REQUEST, "dra-extended-resource-name-unique"]
NO_CLAIM_BESIDE_A_PLUGIN = ["dra-claim-on-dra-cohort"]
"""No DRA claim beside a device plugin's cohort (local and mixed have both: the DRA cohort's smoke Job's claim)."""
IDLE = {
    "device-plugin": sorted(
        [*NO_OPERATOR, *NO_CLASS, *NO_CLAIM_BESIDE_A_PLUGIN, "dra-feature-gates-allowlisted", "dra-webhook-needs-tls"]
    ),
    "dra": sorted(
        [*NO_OPERATOR, *NO_PLAIN_REQUEST, *NO_CLAIM_BESIDE_A_PLUGIN, "dra-webhook-needs-tls", "mig-strategy-consistent"]
    ),
    "local": sorted([*NO_OPERATOR, *NO_MAPPING, "dra-webhook-needs-tls"]),
    "mixed": sorted([*NO_OPERATOR, *NO_MAPPING, "dra-webhook-needs-tls"]),
    "operator-cluster-policy": sorted(
        [
            *NO_CLASS,
            *NO_CLAIM_BESIDE_A_PLUGIN,
            "dra-webhook-needs-tls",
            "gpu-discovery-affinity-kept",
            "mig-strategy-consistent",
        ]
    ),
    "operator-gpu-cluster": sorted(
        [
            *NO_PLAIN_REQUEST,
            *NO_CLAIM_BESIDE_A_PLUGIN,
            "dra-webhook-needs-tls",
            "gpu-discovery-affinity-kept",
            "mig-strategy-consistent",
        ]
    ),
}
"""The mandatory policies with nothing to judge in each example stack (no Operator, no DRA webhook, no MIG, no
standalone discovery DaemonSet, no name mapping): every other one judged something and passed, so a pass here is no
skip."""


@pytest.mark.parametrize("stack", STACKS)
def test_example_stack_passes_every_mandatory_policy(
    stack: str, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = _analyzed(stack, monkeypatch)
    assert any(i.resource_type.startswith("kubernetes:helm.sh/") for i in items)
    charts = [i for i in items if i.resource_type == CHART_V4]
    assert all(c.props == {} for c in charts)
    if charts:
        assert any(i.parent in {c.name for c in charts} for i in items), "rendered objects are fed too"
    findings, idle = _mandatory(harness, items)
    assert findings == []
    assert idle == IDLE[stack]


def test_the_feed_is_not_vacuous(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rendered objects really are checked: a drifted one in the fed stack is refused."""
    items = _analyzed("mixed", monkeypatch)
    config_map = next(i for i in items if i.name.endswith("-nvidia-device-plugin-configs"))
    config_map.props["data"] = {
        k: v.replace("failRequestsGreaterThanOne: true", "failRequestsGreaterThanOne: false")
        for k, v in config_map.props["data"].items()
    }
    findings = _mandatory_findings(harness, items)
    assert len(findings) == 1
    assert findings[0].startswith(
        "shared-gpu-resource-name: kubernetes:core/v1:ConfigMap 'gpu-system/hybrid-gpu-plugin"
    )
