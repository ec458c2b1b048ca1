"""The policy harness: validation args built as the engine builds them, real captured props, stack builders.

Shared by the policy tests; conftest.py keeps only the fixtures.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format, struct_pb2
from pulumi_policy import (
    Policy,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import unknown_checking_proxy

from policy.gpu_allocation.rules.sdk_internals import NotApplicable
from policy.gpu_allocation.vocab import labels as vocab
from tests.support import seeds

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FIXTURES = seeds.FIXTURES
REAL = FIXTURES / "real"
CHART_V4 = "kubernetes:helm.sh/v4:Chart"
RELEASE_V3 = "kubernetes:helm.sh/v3:Release"
STACK = "urn:pulumi:test::eks-hybrid-gpu::"

HYBRID = {vocab.COMPUTE_TYPE_LABEL: vocab.HYBRID}
DP_SELECTOR = {**HYBRID, vocab.DEFAULT_COHORT_LABEL_KEY: "device-plugin"}
DRA_SELECTOR = {**HYBRID, vocab.DEFAULT_COHORT_LABEL_KEY: "dra"}
OPERATOR_SELECTOR = {**HYBRID, vocab.DEFAULT_COHORT_LABEL_KEY: "gpu-operator"}
DP_CHART = "../shared/charts/nvidia-device-plugin-0.20.0.tgz"
DRA_CHART = "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"
OPERATOR_CHART = "gpu-operator"
DP_DAEMONSET = "hybrid-gpu-plugin-nvidia-device-plugin"
DRA_DAEMONSET = "dra-driver-nvidia-gpu-kubelet-plugin"


def wire(props: dict[str, Any]) -> Any:
    """Send props through the engine's serialization and wrap them in the proxy."""
    struct = struct_pb2.Struct()
    struct.update(copy.deepcopy(props))
    return unknown_checking_proxy(deserialize_properties(json_format.MessageToDict(struct)))


def engine_options(parent: str | None = None) -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], parent)


def urn_of(resource_type: str, name: str) -> str:
    return f"{STACK}{resource_type}::{name}"


@dataclass
class Outcome:
    """What a policy reported."""

    violations: list[tuple[str, str | None]] = field(default_factory=list)
    not_applicable: str | None = None

    @property
    def messages(self) -> list[str]:
        return [message for message, _ in self.violations]

    def one(self) -> str:
        assert len(self.violations) == 1, self.messages
        return self.violations[0][0]

    @property
    def applied(self) -> bool:
        """The policy judged the input: it did not call ``args.not_applicable()``."""
        return self.not_applicable is None

    def report(self, message: str, urn: str | None = None) -> None:
        assert isinstance(message, str)
        assert message
        self.violations.append((message, urn))


def passes(outcome: Outcome, note: object = None) -> None:
    """Assert the policy applied and found nothing: a clean case that cannot pass by no longer applying."""
    context = "" if note is None else f" ({note})"
    assert outcome.applied, f"the policy did not apply{context}: {outcome.not_applicable!r}"
    assert outcome.violations == [], f"{outcome.messages}{context}"


def not_applicable(outcome: Outcome, note: object = None) -> str:
    """Assert the policy declared itself not applicable and reported nothing; return its reason."""
    context = "" if note is None else f" ({note})"
    assert outcome.violations == [], f"{outcome.messages}{context}"
    assert outcome.not_applicable is not None, f"the policy applied{context}"
    return outcome.not_applicable


@dataclass
class Item:
    """One resource of a test stack. ``parent`` is another item's name or URN."""

    resource_type: str
    props: dict[str, Any]
    name: str
    parent: str | None = None
    real_urn: str | None = None
    """The URN the engine gave it (captured items); else one is made from type and name."""

    @property
    def urn(self) -> str:
        return self.real_urn or urn_of(self.resource_type, self.name)


@functools.cache
def _real(scenario: str) -> dict[str, Any]:
    with (REAL / f"{scenario}.json").open() as handle:
        loaded: dict[str, Any] = json.load(handle)
        return loaded


def real_records(scenario: str, mode: str = "stack") -> list[dict[str, Any]]:
    """The captured records of a scenario (a fresh copy): ``stack`` or ``resource`` validation."""
    return copy.deepcopy(_real(scenario)[mode])


def real_items(scenario: str) -> list[Item]:
    """A captured stack, as stack validation received it: real types, names, URNs, parents and props."""
    return [Item(r["type"], r["props"], r["name"], r["parent"], r["urn"]) for r in real_records(scenario)]


def rendered_by(scenario: str, chart: str, mode: str = "stack") -> list[dict[str, Any]]:
    """The captured records of the objects one Chart rendered."""
    return [r for r in real_records(scenario, mode) if (r["parent"] or "").rsplit("::", 1)[-1] == chart]


def type_of(manifest: dict[str, Any]) -> str:
    """The Pulumi type token of a Kubernetes manifest."""
    api_version = manifest["apiVersion"]
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return f"kubernetes:{group_version}:{manifest['kind']}"


def _select(manifest: dict[str, Any], selector: dict[str, str]) -> dict[str, Any]:
    """Render a DaemonSet for another cohort selector, as the chart would (extra keys kept)."""
    if manifest["kind"] != "DaemonSet":
        return manifest
    rendered = copy.deepcopy(manifest)
    pod = rendered["spec"]["template"]["spec"]
    if "nodeSelector" not in pod:
        return rendered  # e.g. the NFD worker: on every node by design
    extra = {k: v for k, v in pod["nodeSelector"].items() if k == vocab.MPS_CAPABLE_LABEL}
    pod["nodeSelector"] = {**extra, **selector}
    return rendered


def _run(policy: ResourceValidationPolicy | StackValidationPolicy, args: Any) -> Outcome:
    """Validate as the analyzer does, recording whether the policy applied (``not_applicable()`` raises)."""
    outcome = Outcome()
    try:
        result = policy.validate(args, outcome.report)
    except NotApplicable as error:
        outcome.not_applicable = error.reason or ""
    else:
        # An awaitable would hold the verdict unrun: this harness, like the pack, runs synchronous validators only.
        if inspect.iscoroutine(result):
            result.close()
        assert result is None, f"{policy.name} returned an awaitable, which this harness does not run"
    return outcome


class Harness:
    """Everything a policy test needs: collectors, fixtures and the program's stamps."""

    chart = CHART_V4
    release = RELEASE_V3

    # ---- verdicts (also module functions, for helpers that hold no harness)

    passes = staticmethod(passes)
    not_applicable = staticmethod(not_applicable)

    # ---- collectors

    @staticmethod
    def resource(
        policy: Policy,
        resource_type: str,
        props: dict[str, Any],
        *,
        name: str = "test",
        config: dict[str, Any] | None = None,
        parent: str | None = None,
    ) -> Outcome:
        args = ResourceValidationArgs(
            resource_type,
            wire(props),
            urn_of(resource_type, name),
            name,
            engine_options(parent),
            None,
            config,
        )
        return Harness.run_resource(policy, args)

    @staticmethod
    def run_resource(policy: Policy, args: ResourceValidationArgs) -> Outcome:
        """Run one resource policy on prepared args (they can be shared between policies)."""
        assert isinstance(policy, ResourceValidationPolicy)
        return _run(policy, args)

    @staticmethod
    def manifest_check(policy: Policy, manifest: dict[str, Any], config: dict[str, Any] | None = None) -> Outcome:
        """Run a policy on one manifest: as a resource, or as a stack of that one object."""
        name = manifest["metadata"]["name"]
        if isinstance(policy, StackValidationPolicy):
            return Harness.stack(policy, [Item(type_of(manifest), manifest, name)], config)
        return Harness.resource(policy, type_of(manifest), manifest, name=name, config=config)

    @staticmethod
    def stack(policy: Policy, items: list[Item], config: dict[str, Any] | None = None) -> Outcome:
        assert isinstance(policy, StackValidationPolicy)
        return Harness.run_stack(policy, Harness.stack_args(items, config))

    @staticmethod
    def run_stack(policy: Policy, args: StackValidationArgs) -> Outcome:
        """Run one stack policy on prepared args (they can be shared between policies)."""
        assert isinstance(policy, StackValidationPolicy)
        return _run(policy, args)

    @staticmethod
    def stack_args(items: list[Item], config: dict[str, Any] | None = None) -> StackValidationArgs:
        """StackValidationArgs as the engine builds them: proxied props, parents linked."""
        by_key = {**{i.urn: i for i in items}, **{i.name: i for i in items}}
        resources: dict[str, PolicyResource] = {}
        for item in items:
            parent = by_key.get(item.parent) if item.parent else None
            resources[item.urn] = PolicyResource(
                item.resource_type,
                wire(item.props),
                item.urn,
                item.name,
                engine_options(parent.urn if parent else item.parent),
                None,
                None,
                [],
                {},
            )
        for item in items:
            parent = by_key.get(item.parent) if item.parent else None
            if parent is not None:
                resources[item.urn].parent = resources[parent.urn]
        return StackValidationArgs(list(resources.values()), config)

    @staticmethod
    def real_resource(policy: Policy, record: dict[str, Any], config: dict[str, Any] | None = None) -> Outcome:
        """Run a resource policy on one captured record, with its real type, URN and parent URN."""
        args = ResourceValidationArgs(
            record["type"],
            wire(record["props"]),
            record["urn"],
            record["name"],
            engine_options(record["parent"]),
            None,
            config,
        )
        return Harness.run_resource(policy, args)

    # ---- builders

    @staticmethod
    def item(props: dict[str, Any], name: str | None = None, parent: str | None = None) -> Item:
        """A stack item for a Kubernetes manifest."""
        return Item(type_of(props), props, name or props["metadata"]["name"], parent)

    @staticmethod
    def helm(
        name: str,
        chart: str,
        version: str | None,
        values: dict[str, Any],
        *,
        resource_type: str = CHART_V4,
        namespace: str = "gpu-system",
        **extra: Any,
    ) -> Item:
        props: dict[str, Any] = {"chart": chart, "values": values, "namespace": namespace, "name": name}
        if version is not None:
            props["version"] = version
        props.update(extra)
        return Item(resource_type, props, name)

    docs = staticmethod(seeds.documents)
    """The documents of a fixture file (a fresh copy each call)."""
    values = staticmethod(seeds.document)
    """A values fixture (a fresh copy each call)."""

    @staticmethod
    def find(file_name: str, kind: str, name: str) -> dict[str, Any]:
        for doc in Harness.docs(file_name):
            if doc["kind"] == kind and doc["metadata"]["name"] == name:
                return copy.deepcopy(doc)
        raise KeyError((file_name, kind, name))

    @staticmethod
    def stamp(
        manifest: dict[str, Any],
        owner: str,
        cohort: str,
        selector: dict[str, str],
        *,
        sharing: str = "none",
        config_path: str = "eks-hybrid-gpu:cohorts[0]",
        chart: str | None = None,
    ) -> dict[str, Any]:
        """Stamp a rendered object the way the program does (components/stamping.py)."""
        stamped = copy.deepcopy(manifest)
        metadata = stamped.setdefault("metadata", {})
        metadata.setdefault("labels", {}).update({vocab.OWNER_LABEL: owner, vocab.COHORT_LABEL: cohort})
        annotations = {
            vocab.SELECTOR_ANNOTATION: json.dumps(selector, sort_keys=True, separators=(",", ":")),
            vocab.SHARING_ANNOTATION: sharing,
            vocab.CONFIG_PATH_ANNOTATION: config_path,
        }
        if chart is not None:
            annotations[vocab.CHART_ANNOTATION] = chart
        metadata.setdefault("annotations", {}).update(annotations)
        return stamped

    @staticmethod
    def ledger(cohorts: dict[str, dict[str, Any]], operator_mode: str | None = None) -> dict[str, Any]:
        """The ledger ConfigMap as the program renders it."""
        document = {"cohorts": cohorts, "operatorMode": operator_mode}
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": vocab.LEDGER_NAME,
                "namespace": "kube-system",
                "labels": {vocab.LEDGER_LABEL: "true"},
            },
            "data": {vocab.LEDGER_KEY: json.dumps(document, sort_keys=True)},
        }

    # ---- whole installations, as the analyzer really sees them

    @staticmethod
    def chart_v4(
        name: str,
        records: list[dict[str, Any]],
        owner: str,
        cohort: str,
        selector: dict[str, str],
        *,
        sharing: str,
        index: int,
        keep: Any = None,
    ) -> list[Item]:
        """A Chart v4 as the analyzer gets it: EMPTY props, and its captured rendered objects re-stamped."""
        chart = Item(CHART_V4, {}, name)
        path = f"eks-hybrid-gpu:cohorts[{index}]"
        children = []
        for record in records:
            props = record["props"]
            if keep is not None and not keep(props):
                continue
            captured = props["metadata"]["annotations"].get(vocab.CHART_ANNOTATION)
            stamped = Harness.stamp(
                _select(props, selector), owner, cohort, selector, sharing=sharing, config_path=path, chart=captured
            )
            children.append(Item(record["type"], stamped, f"{name}:{record['name'].split(':', 1)[1]}", name))
        return [chart, *children]

    @staticmethod
    def device_plugin(
        cohort: str = "plugin",
        *,
        name: str = "plugin-chart",
        selector: dict[str, str] | None = None,
        sharing: str = "none",
        index: int = 0,
        variant: str = "local",
    ) -> list[Item]:
        """A device-plugin Chart v4 and its rendered objects, captured from a real preview.

        ``variant``: ``local`` (the local stack), ``ts`` (time-slicing config attached), ``mig`` (MIG mixed),
        ``gfd`` (GFD and the NFD subchart on, the affinity removed, MIG single).
        """
        if variant == "local":
            records = rendered_by("local", "gpu-plugin-chart")
        else:
            records = rendered_by("plugin-variants", f"{variant}-chart")
        return Harness.chart_v4(
            name, records, "device-plugin", cohort, selector or DP_SELECTOR, sharing=sharing, index=index
        )

    @staticmethod
    def dra(
        cohort: str = "dra",
        *,
        name: str = "dra-chart",
        selector: dict[str, str] | None = None,
        index: int = 1,
        variant: str = "local",
        skip_crds: bool = False,
    ) -> list[Item]:
        """A DRA Chart v4 and its rendered objects, captured from a real preview.

        ``variant``: ``local``, ``gates`` (MPSSupport on), ``root`` (driver root /run/nvidia/driver, webhook in
        secret mode without a CA bundle, a foreign affinity), ``cm`` (webhook with cert-manager).
        ``skip_crds`` leaves out the CRDs, as a Chart with skipCrds renders none.
        """
        scenario, chart = {
            "local": ("local", "gpu-dra-chart"),
            "gates": ("dra-variants", "gates-chart"),
            "root": ("dra-variants", "root-chart"),
            "cm": ("dra-cert-manager", "cm-chart"),
        }[variant]
        records = rendered_by(scenario, chart)

        def keep(props: dict[str, Any]) -> bool:
            return not (skip_crds and props.get("kind") == "CustomResourceDefinition")

        return Harness.chart_v4(
            name, records, "dra", cohort, selector or DRA_SELECTOR, sharing="none", index=index, keep=keep
        )

    @staticmethod
    def helm_release(name: str, chart: str, version: str | None, values: dict[str, Any], **extra: Any) -> Item:
        """A helm.v3.Release: its inputs, values included, are visible (its rendered objects are not)."""
        return Harness.helm(name, chart, version, values, resource_type=RELEASE_V3, **extra)

    @staticmethod
    def operator(mode: str = "gpu-cluster", values: dict[str, Any] | None = None, **extra: Any) -> Item:
        """The GPU Operator Release in the guide's GPUCluster or the program's ClusterPolicy mode."""
        if values is None:
            file_name = f"operator-{mode}-values.yaml"
            values = Harness.values(file_name)
        return Harness.helm(
            "gpu-operator-release",
            OPERATOR_CHART,
            "v26.7.0",
            values,
            resource_type=RELEASE_V3,
            namespace="gpu-operator",
            **extra,
        )

    @staticmethod
    def cohort_entry(owner: str, selector: dict[str, str], sharing: str = "none", **extra: Any) -> dict[str, Any]:
        namespaces = {"device-plugin": "gpu-system", "dra": "gpu-dra-system", "gpu-operator": "gpu-operator"}
        return {"owner": owner, "nodeSelector": selector, "sharing": sharing, "namespace": namespaces[owner], **extra}

    @staticmethod
    def seed_ledger(**extra_cohorts: dict[str, Any]) -> Item:
        """The ledger of the local stack: a device-plugin cohort and a DRA cohort."""
        cohorts = {
            "plugin": Harness.cohort_entry("device-plugin", DP_SELECTOR),
            "dra": Harness.cohort_entry("dra", DRA_SELECTOR),
            **extra_cohorts,
        }
        return Harness.item(Harness.ledger(cohorts), name="ledger")
