"""The whole pack over what the analyzer really received in real previews (tests/fixtures/policy/real/).

Every capture is replayed through pulumi-policy's own analyzer servicer, the way the engine calls it:
``Analyze`` once per resource (inputs), ``AnalyzeStack`` once with every resource (planned state, parents).
This reproduces the finding (a Chart v4 arrives with empty props) without an engine, and pins which
mandatory policies each captured stack violates.
"""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import struct_pb2
from pulumi.runtime import proto
from pulumi_policy import EnforcementLevel, StackValidationPolicy

from policy.gpu_allocation.pack import PACK_NAME, build_policies
from policy.gpu_allocation.rules.sdk_internals import AnalyzerServicer
from tests.support.policy_harness import REAL, real_records

pytestmark = pytest.mark.policy

SCENARIOS = sorted(p.stem for p in REAL.glob("*.json"))
CHART_V4 = "kubernetes:helm.sh/v4:Chart"
RELEASE = "kubernetes:helm.sh/v3:Release"


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(value)
    return struct


def _options(parent: str | None) -> proto.AnalyzerResourceOptions:
    return proto.AnalyzerResourceOptions(parent=parent or "")


def responses(scenario: str) -> list[Any]:
    """The servicer's answer to every ``Analyze`` of one captured preview, then to its ``AnalyzeStack``."""
    servicer = AnalyzerServicer(PACK_NAME, "0.1.0", build_policies(), EnforcementLevel.ADVISORY)
    answers: list[Any] = []
    for record in real_records(scenario, "resource"):
        request = proto.AnalyzeRequest(
            type=record["type"],
            properties=_struct(record["props"]),
            urn=record["urn"],
            name=record["name"],
            options=_options(record["parent"]),
        )
        answers.append(servicer.Analyze(request, None))
    resources = [
        proto.AnalyzerResource(
            type=record["type"],
            properties=_struct(record["props"]),
            urn=record["urn"],
            name=record["name"],
            options=_options(record["parent"]),
            parent=record["parent"] or "",
        )
        for record in real_records(scenario, "stack")
    ]
    answers.append(servicer.AnalyzeStack(proto.AnalyzeStackRequest(resources=resources), None))
    return answers


def analyze(scenario: str) -> list[Any]:
    """Every diagnostic the pack reports for one captured preview."""
    diagnostics = [d for answer in responses(scenario) for d in answer.diagnostics]
    assert not [d for d in diagnostics if "can't run policy" in d.message]
    return diagnostics


def judged(scenario: str) -> dict[str, int]:
    """Policy -> in how many calls it judged (was not reported not applicable): each resource, or the stack."""
    *per_resource, stack = responses(scenario)
    counts: dict[str, int] = {}
    for policy in build_policies():
        answers = [stack] if isinstance(policy, StackValidationPolicy) else per_resource
        counts[policy.name] = sum(policy.name not in {n.policy_name for n in a.not_applicable} for a in answers)
    return counts


def mandatory(scenario: str) -> dict[str, int]:
    """Mandatory policy -> number of violations."""
    found: dict[str, int] = {}
    for diagnostic in analyze(scenario):
        if diagnostic.enforcementLevel == proto.MANDATORY:
            found[diagnostic.policyName] = found.get(diagnostic.policyName, 0) + 1
    return found


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_chart_v4_props_are_empty_and_release_props_are_not(scenario: str) -> None:
    """What the capture showed, kept as a guard: if an engine ever sends Chart v4 inputs, revisit the pack."""
    for mode in ("resource", "stack"):
        records = real_records(scenario, mode)
        assert all(r["props"] == {} for r in records if r["type"] == CHART_V4)
        assert all("values" in r["props"] and "version" in r["props"] for r in records if r["type"] == RELEASE)
        charts = {r["urn"] for r in records if r["type"] == CHART_V4}
        rendered = [r for r in records if r["parent"] in charts]
        assert bool(charts) == bool(rendered)
        for record in rendered:
            annotations = record["props"]["metadata"]["annotations"]
            assert "eks-hybrid-gpu.io/chart" in annotations
            assert "eks-hybrid-gpu.io/owner" in record["props"]["metadata"]["labels"]


def test_the_local_stack_passes_the_whole_pack() -> None:
    """The finding: chart-version-pinned refused the local stack's Chart v4 for 'chart null version null'."""
    assert analyze("local") == []
    # ... and not by skipping: what each policy judged. The stack has no Operator, no DRA webhook and no smoke
    # Job it did not build (its own are smoke-job-hardened's), so those policies alone have nothing to judge.
    assert judged("local") == {
        "chart-version-pinned": 26,
        "compute-domain-crds-one-owner": 1,
        "dra-api-current": 11,
        "dra-claim-on-dra-cohort": 1,
        "dra-extended-resource-gate-on": 0,
        "dra-extended-resource-name-unique": 1,
        "dra-extended-resource-one-publisher": 0,
        "dra-extended-resource-request-served": 1,
        "dra-feature-gates-allowlisted": 2,
        "dra-webhook-needs-tls": 0,
        "driver-ownership-consistent": 0,
        "driver-verification-declared": 0,
        "gpu-cluster-excludes-standalone-dra": 1,
        "gpu-discovery-affinity-kept": 3,
        "gpu-request-shape": 5,
        "mig-strategy-consistent": 1,
        "nfd-one-owner": 1,
        "no-auto-mode-targeting": 5,
        "no-dual-allocation": 5,
        "no-visible-devices-override": 1,
        "operator-cr-exclusive": 0,
        "operator-device-plugin-disabled": 1,
        "operator-hooks-kept": 0,
        "operator-operand-tolerations-reviewed": 0,
        "ownership-ledger-consistent": 1,
        "shared-gpu-resource-name": 1,
        "single-allocation-owner": 1,
        "smoke-job-hardened": 2,
        "smoke-job-run-approved": 0,
        "smoke-job-token-unmounted": 1,
        "time-slicing-config-attached": 1,
    }


EXPECTED: dict[str, dict[str, int]] = {
    "local": {},
    # No ledger (library use); affinity: null on 3 DaemonSets; MIG single on a cohort declared none.
    "plugin-variants": {
        "ownership-ledger-consistent": 1,
        "gpu-discovery-affinity-kept": 3,
        "mig-strategy-consistent": 1,
    },
    # Two DRA charts ship the compute-domain CRDs; controller and webhook Deployments not pinned to hybrid; a
    # foreign affinity; MPSSupport=true; the webhook in secret mode without a CA bundle.
    "dra-variants": {
        "compute-domain-crds-one-owner": 2,
        "ownership-ledger-consistent": 1,
        "no-auto-mode-targeting": 2,
        "gpu-discovery-affinity-kept": 1,
        "dra-feature-gates-allowlisted": 1,
        "dra-webhook-needs-tls": 1,
    },
    # cert-manager TLS passes; controller and webhook Deployments are not pinned to hybrid.
    "dra-cert-manager": {"ownership-ledger-consistent": 1, "no-auto-mode-targeting": 2},
    # Two Operator releases: both modes, the CRDs twice. Nothing is stamped, so no ledger is required.
    "operators": {"compute-domain-crds-one-owner": 2, "operator-cr-exclusive": 2},
    # ^0.20.0 from a Helm repository: refused on each of the 5 objects the chart rendered.
    "floating": {"ownership-ledger-consistent": 1, "chart-version-pinned": 5},
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_mandatory_violations_of_each_captured_preview(scenario: str) -> None:
    assert mandatory(scenario) == EXPECTED[scenario]


SHARED_WRITE = "a policy wrote into the props all policies of one request share"


class _Frozen(dict):  # type: ignore[type-arg]
    """A props copy that refuses every write: a rule writing into the copy all policies of a request share."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError(SHARED_WRITE)

    __setitem__ = __delitem__ = update = pop = popitem = setdefault = clear = _refuse  # type: ignore[assignment]


class _FrozenList(list):  # type: ignore[type-arg]
    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError(SHARED_WRITE)

    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = sort = reverse = _refuse  # type: ignore[assignment]
    __iadd__ = _refuse  # type: ignore[assignment]


def _frozen(value: Any) -> Any:
    if type(value) is dict:
        return _Frozen({key: _frozen(item) for key, item in value.items()})
    if type(value) is list:
        return _FrozenList(_frozen(item) for item in value)
    return value


def test_one_conversion_per_request_answers_exactly_as_one_per_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK converts each resource once per policy; shared once per request, every answer stays the same.

    Every capture is replayed as the SDK does it alone, then with the sharing on and the shared props copies frozen
    (a rule that wrote into them would fail here), and the answers must be equal, diagnostics and "not applicable"
    alike. The sharing counts: the copy is made once per resource, not once per policy.
    """
    from google.protobuf import json_format

    from policy.gpu_allocation.rules import props, resource, sdk_internals

    before = {s: [json_format.MessageToDict(a) for a in responses(s)] for s in SCENARIOS}
    for name in ("json_format", "deserialize_properties", "unknown_checking_proxy"):
        monkeypatch.setattr(sdk_internals.sdk_policy, name, getattr(sdk_internals.sdk_policy, name))
    for name in ("Analyze", "AnalyzeStack", "_get_resource_options", "_get_provider_resource"):
        monkeypatch.setattr(AnalyzerServicer, name, getattr(AnalyzerServicer, name))
    copies: list[int] = []

    def frozen_copy(value: Any) -> tuple[dict[str, Any], str | None]:
        copies.append(1)
        plain, error = props.readable.__wrapped__(value)
        return _frozen(plain), error

    monkeypatch.setattr(resource, "readable", sdk_internals.once_per_request(frozen_copy))
    sdk_internals.share_deserialization_per_request()
    after = {s: [json_format.MessageToDict(a) for a in responses(s)] for s in SCENARIOS}
    assert after == before
    requests = sum(len(real_records(s, "resource")) + len(real_records(s, "stack")) for s in SCENARIOS)
    assert len(copies) <= requests


def test_a_resources_options_and_provider_are_built_once_per_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK builds them for each policy; within one request every policy gets the same read-only record."""
    from policy.gpu_allocation.rules import sdk_internals

    built: list[str] = []

    def options(self: Any, item: Any) -> object:
        built.append(item["urn"])
        return object()

    monkeypatch.setattr(AnalyzerServicer, "_get_resource_options", options)
    shared = sdk_internals.once_per_request_method(options)
    item = real_records(SCENARIOS[0], "resource")[0]
    assert shared(None, item) is not shared(None, item)  # outside a request: built on every call

    @sdk_internals._serving_one_request
    def one_request(self: Any, request: Any, context: Any) -> tuple[object, object]:
        return shared(None, request), shared(None, request)

    first, second = one_request(None, item, None)
    assert first is second
    assert one_request(None, item, None)[0] is not first  # a new request builds again
    assert len(built) == 4
