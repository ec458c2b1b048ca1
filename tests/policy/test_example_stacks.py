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
from components.config import StackConfig
from components.stack import _ownership
from eks_hybrid_gpu.mocks import RecordingMocks, run_program, stack_config
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


def _as_analyzed(chart: Item, config: StackConfig) -> list[Item]:
    """A mock-registered Chart v4 as a real preview sends it: empty props, plus its rendered objects."""
    release = chart.props["name"]
    index, cohort = next((i, c) for i, c in enumerate(config.cohorts) if f"hybrid-gpu-{c.name}" == release)
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
