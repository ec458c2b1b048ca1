"""The example stacks, run through the real program under mocks, pass every mandatory policy.

Under mocks a Chart v4 renders no children, so this checks what the program registers itself
(Chart/Release inputs, smoke Jobs, DRA objects, ledger, namespaces); the rendered objects are
covered by the fixtures rendered from the real charts.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy

from components import ownership as vocab
from policy.pack import build_policies
from tests.support.mocks import RecordingMocks, run_program, stack_config

from .conftest import ROOT, Harness, Item

pytestmark = pytest.mark.policy

STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))


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
        nodes.append({"metadata": {"name": f"node-{cohort['name']}", "labels": labels}})
    return nodes


def _registered(stack: str, monkeypatch: pytest.MonkeyPatch) -> list[Item]:
    config = stack_config(stack)
    # Declared, so the run does not depend on the EKS describe (tests/unit/test_stacks.py PRECHECK_BUG).
    config.setdefault("cluster", {}).setdefault("kubernetesVersion", "1.34.4")
    nodes = _nodes(config)
    monkeypatch.setattr("components.program.read_nodes", lambda *_args: [dict(n) for n in nodes])
    recorder = run_program(config, stack, _Mocks())
    names = {r.name for r in recorder.registrations}
    return [
        Item(r.type_, r.inputs, r.name, r.parent if r.parent in names else None)
        for r in recorder.registrations
        if not r.type_.startswith("pulumi:providers:")
    ]


@pytest.mark.parametrize("stack", STACKS)
def test_example_stack_passes_every_mandatory_policy(
    stack: str, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = _registered(stack, monkeypatch)
    assert any(i.resource_type.startswith("kubernetes:helm.sh/") for i in items)
    findings: list[str] = []
    for policy in build_policies():
        if policy.enforcement_level != EnforcementLevel.MANDATORY:
            continue
        if isinstance(policy, StackValidationPolicy):
            findings += [f"{policy.name}: {m}" for m in harness.stack(policy, items).messages]
        elif isinstance(policy, ResourceValidationPolicy):
            for item in items:
                outcome = harness.resource(policy, item.resource_type, item.props, name=item.name)
                findings += [f"{policy.name}: {m}" for m in outcome.messages]
    assert findings == []
